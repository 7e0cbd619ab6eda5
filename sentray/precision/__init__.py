"""How an encoder runs, decided before it exists: `plan_encoder` (`plan`), the one function
every job calls to turn an `EncoderConfig` into an `EncoderPlan` (the device, the precision
and its runtime, why, and the runtime's artefact); `--precision auto` measured on the CPU
that runs the encoders (`probe`: candidates, quality gates, the payback rule, the cached
decision); the int8 artefact, exported, calibrated and keyed in one place (`artefacts`); this
machine's cache of both (`cache`).

May import: sentray.kit, sentray.encode.
"""
