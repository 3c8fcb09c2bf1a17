CREATE TABLE "processes" (
	"id" text PRIMARY KEY NOT NULL,
	"host" text NOT NULL,
	"pid" integer NOT NULL,
	"started_at" bigint NOT NULL,
	"lease_until" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "owner" text;--> statement-breakpoint
ALTER TABLE "idempotency_records" ADD COLUMN "owner" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "owner" text;