CREATE TABLE `audit_checkpoints` (
	`organization_id` text NOT NULL,
	`kind` text NOT NULL,
	`seq` integer NOT NULL,
	`hash` text NOT NULL,
	`at` integer NOT NULL,
	`kid` text NOT NULL,
	`jws` text NOT NULL,
	PRIMARY KEY(`organization_id`, `kind`, `seq`),
	FOREIGN KEY (`organization_id`) REFERENCES `organizations`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `organization_quotas` (
	`organization_id` text NOT NULL,
	`name` text NOT NULL,
	`value` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`organization_id`, `name`),
	FOREIGN KEY (`organization_id`) REFERENCES `organizations`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `audit_log` ADD `seq` integer;--> statement-breakpoint
ALTER TABLE `audit_log` ADD `prev_hash` text;--> statement-breakpoint
ALTER TABLE `audit_log` ADD `hash` text;--> statement-breakpoint
CREATE UNIQUE INDEX `audit_log_org_seq_idx` ON `audit_log` (`organization_id`,`seq`);--> statement-breakpoint
ALTER TABLE `deployments` ADD `output_bytes` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `output_purged_at` integer;