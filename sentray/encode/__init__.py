"""Models and their read-out, the one implementation every job encodes with: loading a model by
Hugging Face id, local folder or packaged name (`model_loading`), what a model folder declares
about itself (`model_info`: sentray.json, a sentence-transformers pooling, max_length), the
poolings as pure tensor functions (`pooling`), the pooled encoder, a Hugging Face encoder and a
pooling as one module that the encoder, the trainer and the sentence-transformers module all run
(`pooled_model`), `EncoderConfig` (`config`), `SentenceEncoder` (`encoder`), the
sentence-transformers module (`st_module`) and the writer of model folders (`export`).

May import: sentray.kit.
"""
