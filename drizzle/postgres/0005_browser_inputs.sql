CREATE TABLE "browser_inputs" (
	"id" text PRIMARY KEY NOT NULL,
	"membership_id" text NOT NULL,
	"organization_id" text NOT NULL,
	"user_id" text NOT NULL,
	"app_id" text NOT NULL,
	"name" text NOT NULL,
	"status" text NOT NULL,
	"ciphertext" text,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "browser_inputs" ADD CONSTRAINT "browser_inputs_membership_id_memberships_id_fk" FOREIGN KEY ("membership_id") REFERENCES "public"."memberships"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "browser_inputs" ADD CONSTRAINT "browser_inputs_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "browser_inputs" ADD CONSTRAINT "browser_inputs_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "browser_inputs" ADD CONSTRAINT "browser_inputs_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "browser_inputs_expires_idx" ON "browser_inputs" USING btree ("expires_at");