ALTER TABLE "tasks" ADD COLUMN "input_requests" json;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "input_responses" json;