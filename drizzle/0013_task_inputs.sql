ALTER TABLE `tasks` ADD `input_requests` text;--> statement-breakpoint
ALTER TABLE `tasks` ADD `input_responses` text;