-- Stage 2 (synthesize): the acceptance check that the state is linked: which write tools a read
-- tool leads to through the tool graph (offline binding), computed when the environment is stored.
ALTER TABLE environments ADD COLUMN IF NOT EXISTS n_write_tools INTEGER DEFAULT 0;        -- accepted write tools
ALTER TABLE environments ADD COLUMN IF NOT EXISTS writes_unreachable JSON DEFAULT '[]';   -- write tools no read tool leads to in the tool graph
ALTER TABLE environments ADD COLUMN IF NOT EXISTS writes_standalone JSON DEFAULT '[]';    -- of those, the ones that need no stored id (a task can start with them: a create, a login)
