CREATE TABLE `idempotency_records` (
	`session_id` text NOT NULL,
	`membership_id` text NOT NULL,
	`organization_id` text NOT NULL,
	`request_id` text NOT NULL,
	`tool` text NOT NULL,
	`status` text NOT NULL,
	`result` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`session_id`, `membership_id`, `organization_id`, `request_id`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_records_expires_idx` ON `idempotency_records` (`expires_at`);