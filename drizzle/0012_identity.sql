CREATE TABLE `sign_in_flows` (
	`id` text PRIMARY KEY NOT NULL,
	`provider` text NOT NULL,
	`browser_binding` text NOT NULL,
	`nonce` text NOT NULL,
	`code_verifier` text NOT NULL,
	`return_to` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sign_in_flows_expires_idx` ON `sign_in_flows` (`expires_at`);--> statement-breakpoint
CREATE TABLE `used_assertions` (
	`issuer` text NOT NULL,
	`jti` text NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`issuer`, `jti`)
);
--> statement-breakpoint
CREATE INDEX `used_assertions_expires_idx` ON `used_assertions` (`expires_at`);--> statement-breakpoint
CREATE TABLE `user_identities` (
	`provider` text NOT NULL,
	`subject` text NOT NULL,
	`user_id` text NOT NULL,
	`email` text NOT NULL,
	`created_at` integer NOT NULL,
	`last_sign_in_at` integer,
	PRIMARY KEY(`provider`, `subject`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `user_identities_user_idx` ON `user_identities` (`user_id`);--> statement-breakpoint
ALTER TABLE `oauth_clients` ADD `source` text DEFAULT 'registration' NOT NULL;