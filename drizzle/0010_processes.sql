CREATE TABLE `processes` (
	`id` text PRIMARY KEY NOT NULL,
	`host` text NOT NULL,
	`pid` integer NOT NULL,
	`started_at` integer NOT NULL,
	`lease_until` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `deployments` ADD `owner` text;--> statement-breakpoint
ALTER TABLE `idempotency_records` ADD `owner` text;--> statement-breakpoint
ALTER TABLE `tasks` ADD `owner` text;