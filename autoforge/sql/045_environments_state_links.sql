-- Stage 2 (synthesize): the write tools a read reaches in the tool graph only through state
-- edges (autoforge.dags.graph.state_edges: the read shows the record or fields the write
-- changes, but none of its outputs feeds the write's parameters).
ALTER TABLE environments ADD COLUMN IF NOT EXISTS writes_by_state JSON DEFAULT '[]';
