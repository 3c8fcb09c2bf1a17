CREATE TABLE `tasks` (
	`id` text PRIMARY KEY NOT NULL,
	`membership_id` text NOT NULL,
	`organization_id` text NOT NULL,
	`tool` text NOT NULL,
	`status` text NOT NULL,
	`status_message` text,
	`result` text,
	`error` text,
	`cancel_requested_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `tasks_expires_idx` ON `tasks` (`expires_at`);--> statement-breakpoint
CREATE INDEX `tasks_status_idx` ON `tasks` (`status`);