-- A remote session's call arguments and results (JSON text of numbers, 20-80 KB a training step) are stored out of
-- line without pglz compression: compressing them cost the embedded database several ms per step on a session's
-- critical path (docs/CLI.md, "How a call travels"), for little space saved on rows that live as long as the session.
ALTER TABLE "session_calls" ALTER COLUMN "args" SET STORAGE EXTERNAL;--> statement-breakpoint
ALTER TABLE "session_calls" ALTER COLUMN "result" SET STORAGE EXTERNAL;
