"""Models and their read-out, the one implementation every job encodes with: loading a model by
Hugging Face id, local folder or packaged name (`model_loading`), what a model folder declares
about itself (`model_info`: sentray.json, a sentence-transformers pooling, max_length), a model
folder checked before anything loads it (`model_checks`), the poolings as pure tensor functions
(`pooling`) and by name with the Ditto heads (`pooling_catalog`), the pooled encoder, a Hugging
Face encoder and a pooling as one module that the encoder, the trainer and the
sentence-transformers module all run (`pooled_model`); `EncoderConfig`, what a user asks for
(`config`); `EncoderPlan`, what an encoder will be, decided before it exists, and its model part
(`plan`); the runtimes a plan runs on (`runtimes`: torch, ONNX Runtime); `SentenceEncoder`, built
from a plan (`encoder`); the sentence-transformers module (`st_module`) and the writer of model
folders (`export`). How a plan's precision is decided is `sentray.precision`'s.

May import: sentray.kit.
"""
