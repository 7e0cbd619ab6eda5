"""How an encoder runs, decided before it exists: `plan_encoder` (`plan`), the one function
every job calls to turn an `EncoderConfig` into an `EncoderPlan` (the device, the precision
and its runtime, why, and the runtime's artefact); `--precision auto` measured on the CPU
that runs the encoders (`probe`: candidates, quality gates, the payback rule, the cached
decision); whether an int8 model can pay on this CPU, from one of its matrix products timed
in int8 and fp32 before one is made (`int8_products`); the ONNX and int8 artefacts, exported,
calibrated and keyed in one place, and this machine's cache of them and of the probe's
decisions (`artefacts`).

May import: sentray.kit, sentray.encode.
"""
