CREATE TABLE "project_invitations" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"role" text NOT NULL,
	"token_hash" text NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"accepted" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "project_invitations_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "project_members" (
	"project_id" text NOT NULL,
	"user_id" text NOT NULL,
	"role" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "projects" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
INSERT INTO "users" ("id", "name", "email") VALUES ('usr_local', 'Local user', 'local@tinkerlab.local') ON CONFLICT DO NOTHING;--> statement-breakpoint
INSERT INTO "projects" ("id", "name", "created_by") VALUES ('prj_default', 'Default', 'usr_local');--> statement-breakpoint
INSERT INTO "project_members" ("project_id", "user_id", "role") SELECT 'prj_default', 'usr_local', 'owner' WHERE NOT EXISTS (SELECT 1 FROM "users" WHERE "role" = 'admin');--> statement-breakpoint
INSERT INTO "project_members" ("project_id", "user_id", "role") SELECT 'prj_default', "id", 'owner' FROM "users" WHERE "role" = 'admin' AND "id" <> 'usr_local';--> statement-breakpoint
DELETE FROM "share_links";--> statement-breakpoint
ALTER TABLE "datasets" DROP CONSTRAINT "datasets_name_unique";--> statement-breakpoint
ALTER TABLE "share_links" DROP CONSTRAINT "share_links_token_unique";--> statement-breakpoint
ALTER TABLE "share_links" DROP CONSTRAINT "share_links_run_id_runs_id_fk";
--> statement-breakpoint
DROP INDEX "share_links_run_idx";--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "project_id" text DEFAULT 'prj_default' NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ALTER COLUMN "project_id" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "role" text DEFAULT 'editor' NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ALTER COLUMN "role" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "datasets" ADD COLUMN "project_id" text DEFAULT 'prj_default' NOT NULL;--> statement-breakpoint
ALTER TABLE "datasets" ALTER COLUMN "project_id" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "experiments" ADD COLUMN "project_id" text DEFAULT 'prj_default' NOT NULL;--> statement-breakpoint
ALTER TABLE "experiments" ALTER COLUMN "project_id" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "project_id" text DEFAULT 'prj_default' NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "project_id" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "token_hash" text NOT NULL;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "project_id" text NOT NULL;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "kind" text NOT NULL;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "run_ids" jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "view" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "title" text NOT NULL;--> statement-breakpoint
ALTER TABLE "share_links" ADD COLUMN "last_opened_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "project_invitations" ADD CONSTRAINT "project_invitations_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_invitations" ADD CONSTRAINT "project_invitations_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_members" ADD CONSTRAINT "project_members_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "project_invitations_project_idx" ON "project_invitations" USING btree ("project_id");--> statement-breakpoint
CREATE UNIQUE INDEX "project_members_pair_uq" ON "project_members" USING btree ("project_id","user_id");--> statement-breakpoint
CREATE INDEX "project_members_user_idx" ON "project_members" USING btree ("user_id");--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "datasets" ADD CONSTRAINT "datasets_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "experiments" ADD CONSTRAINT "experiments_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "share_links" ADD CONSTRAINT "share_links_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "datasets_project_name_uq" ON "datasets" USING btree ("project_id","name");--> statement-breakpoint
CREATE INDEX "experiments_project_idx" ON "experiments" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "runs_project_idx" ON "runs" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "share_links_project_idx" ON "share_links" USING btree ("project_id");--> statement-breakpoint
ALTER TABLE "share_links" DROP COLUMN "token";--> statement-breakpoint
ALTER TABLE "share_links" DROP COLUMN "run_id";--> statement-breakpoint
ALTER TABLE "share_links" ADD CONSTRAINT "share_links_token_hash_unique" UNIQUE("token_hash");