ALTER TABLE `oauth_authorization_requests` ADD `client_address` text;--> statement-breakpoint
CREATE INDEX `oauth_authorization_requests_address_idx` ON `oauth_authorization_requests` (`client_address`,`expires_at`);--> statement-breakpoint
ALTER TABLE `deployments` ADD `pgid` integer;