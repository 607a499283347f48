CREATE TABLE "idempotency_keys" (
	"caller" text NOT NULL,
	"procedure" text NOT NULL,
	"key" text NOT NULL,
	"input_hash" text NOT NULL,
	"answer" text,
	"held_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "idempotency_keys_caller_procedure_key_idx" ON "idempotency_keys" USING btree ("caller","procedure","key");--> statement-breakpoint
CREATE INDEX "idempotency_keys_created_idx" ON "idempotency_keys" USING btree ("created_at");