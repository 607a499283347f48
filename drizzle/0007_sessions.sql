CREATE TYPE "public"."session_call_state" AS ENUM('queued', 'running', 'done', 'failed');--> statement-breakpoint
ALTER TYPE "public"."job_kind" ADD VALUE 'session';--> statement-breakpoint
CREATE TABLE "session_calls" (
	"id" text PRIMARY KEY NOT NULL,
	"seq" bigserial NOT NULL,
	"run_id" text NOT NULL,
	"method" text NOT NULL,
	"args" text NOT NULL,
	"state" "session_call_state" DEFAULT 'queued' NOT NULL,
	"result" text,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"answered_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "session_calls" ADD CONSTRAINT "session_calls_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "session_calls_run_state_seq_idx" ON "session_calls" USING btree ("run_id","state","seq");