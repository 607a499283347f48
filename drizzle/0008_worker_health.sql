ALTER TABLE "jobs" ADD COLUMN "lost_worker_id" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "resumed_from_step" integer;--> statement-breakpoint
ALTER TABLE "workers" ADD COLUMN "lag_ms" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "workers" ADD COLUMN "late_ms" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "workers" ADD COLUMN "late_at" timestamp with time zone;