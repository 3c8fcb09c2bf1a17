CREATE TABLE "audit_checkpoints" (
	"organization_id" text NOT NULL,
	"kind" text NOT NULL,
	"seq" bigint NOT NULL,
	"hash" text NOT NULL,
	"at" bigint NOT NULL,
	"kid" text NOT NULL,
	"jws" text NOT NULL,
	CONSTRAINT "audit_checkpoints_organization_id_kind_seq_pk" PRIMARY KEY("organization_id","kind","seq")
);
--> statement-breakpoint
CREATE TABLE "organization_quotas" (
	"organization_id" text NOT NULL,
	"name" text NOT NULL,
	"value" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "organization_quotas_organization_id_name_pk" PRIMARY KEY("organization_id","name")
);
--> statement-breakpoint
ALTER TABLE "audit_log" ADD COLUMN "seq" bigint;--> statement-breakpoint
ALTER TABLE "audit_log" ADD COLUMN "prev_hash" text;--> statement-breakpoint
ALTER TABLE "audit_log" ADD COLUMN "hash" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "output_bytes" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "output_purged_at" bigint;--> statement-breakpoint
ALTER TABLE "audit_checkpoints" ADD CONSTRAINT "audit_checkpoints_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "organization_quotas" ADD CONSTRAINT "organization_quotas_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "audit_log_org_seq_idx" ON "audit_log" USING btree ("organization_id","seq");