-- Stage 6 (rollouts): why an episode ended, and per-episode diagnostics (Episode.termination_detail, .diagnostics).
ALTER TABLE episodes ADD COLUMN IF NOT EXISTS termination_detail VARCHAR;  -- error message, give-up reason, limit hit
ALTER TABLE episodes ADD COLUMN IF NOT EXISTS diagnostics JSON DEFAULT '{}'; -- injection plan, judge reason, tokens, wall time
