ALTER TABLE "checkpoints" ADD COLUMN "set_aside_reason" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "worker_losses" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "lost_at_step" integer;