ALTER TABLE "runs" ADD COLUMN "tags" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "notes" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "archived_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "jobs_run_idx" ON "jobs" USING btree ("run_id","submitted_at");--> statement-breakpoint
CREATE INDEX "metric_points_run_name_value_idx" ON "metric_points" USING btree ("run_id","name","value");