"""Models and their read-out, the one implementation every job encodes with: a model looked up
once by Hugging Face id, local folder or packaged name, a local folder's files checked before
anything loads them, and their digest (`model_lookup`); what a model's files declare
(sentray.json, a sentence-transformers pooling, max_length: its facts) (`model_files`); the
model loaded: its config, tokenizer and encoder (`model_loading`); the poolings as pure tensor
functions (`pooling`) and by name with the Ditto heads (`pooling_catalog`), the pooled encoder,
a Hugging Face encoder and a pooling as one module that the encoder, the trainer and the
sentence-transformers module all run (`pooled_model`); `EncoderConfig`, what a user asks for
(`config`); `EncoderPlan`, what an encoder will be, decided before it exists, and its model part
(`plan`); the runtimes a plan runs on, one module each, and their registry (the `runtimes`
subpackage: torch, ONNX Runtime, OpenVINO);
`SentenceEncoder`, built from a plan (`encoder`); a forward's batches padded to a few fixed
shapes, for a query encoder (`shape_buckets`); the sentence-transformers module
(`st_module`) and the writer of model folders (`export`). How a plan's precision is decided is
`sentray.precision`'s.

May import: sentray.kit.
"""
