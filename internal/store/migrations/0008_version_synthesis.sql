-- Issue #31, decisions D31: a processor version's own synthesis settings, recorded
-- when `larkline versions start` is given any (synthesizer, model, prompt version,
-- output and chunk token budgets). NULL: the version synthesizes with the deployment's
-- configuration, as every version did before. The settings never change once recorded
-- and hold no secret: the model endpoint and its API key stay the deployment's.
ALTER TABLE processor_versions
    ADD COLUMN synthesis jsonb CHECK (synthesis IS NULL OR jsonb_typeof(synthesis) = 'object');
