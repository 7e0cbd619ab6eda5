"""Models and their read-out, the one implementation every job encodes with: loading a model by
Hugging Face id, local folder or packaged name (`model_loading`), what a model folder declares
about itself (`model_info`: sentray.json, a sentence-transformers pooling, max_length), the
poolings as pure tensor functions (`pooling`), the pooled encoder, a Hugging Face encoder and a
pooling as one module that the encoder, the trainer and the sentence-transformers module all run
(`pooled_model`), `EncoderConfig` (`config`), `SentenceEncoder` (`encoder`), the
sentence-transformers module (`st_module`) and the writer of model folders (`export`); the
poolings by name and the Ditto heads (`pooling_catalog`), a model folder checked before anything
loads it (`model_checks`), the precisions and the CPU's features (`precision`), `--precision
auto` measured on this CPU (`precision_probe`), and static int8 on ONNX Runtime (`int8`).

May import: sentray.kit.
"""
