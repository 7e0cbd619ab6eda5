"""SIFTER augmentation on Ray Data: for every sentence X, Y (X + its backbone) and Z (X without
articles, conjunctions and pronouns), with the paper's corpus filter.

    python jobs/augment.py                                  # bundled sample, local Ray
    python jobs/augment.py --input corpus.txt --output out/aug --actors 2
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \\
        python jobs/augment.py --input s3://bucket/corpus/ --output s3://bucket/aug/

Output: OUTPUT/<file key>/part-*.parquet with id, text (X), backbone_text (Y), pruned_text (Z),
subject, relation, object, backbone_source (openie | dependency | none), source, row; rejected
rows with their reject_reason in REJECTS (default OUTPUT-rejects); OUTPUT/_summary.json. Every
input row is in exactly one of the two.
"""

from __future__ import annotations

import argparse
import json
import logging

from sentray.augment import AugmentConfig, run_augmentation
from sentray.cli import (
    add_corpus_args,
    add_pool_args,
    corpus_config_from_args,
    pool_config_from_args,
    setup_logging,
)

logger = logging.getLogger("sentray.augment")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(parser, default_output="out/augmented")
    parser.add_argument("--rejects", default=None,
                        help="folder for rejected rows and their reason (default: OUTPUT-rejects)")
    sifter = parser.add_argument_group("augmentation")
    sifter.add_argument("--backend", default="spacy", choices=["spacy", "corenlp"],
                        help="spacy: spaCy en_core_web_sm + triplet-extract OpenIE (offline); "
                             "corenlp: Stanford CoreNLP's OpenIE and parser via stanza, a server "
                             "per node (CORENLP_HOME) (default: spacy)")
    sifter.add_argument("--corenlp-url", default="http://localhost:9000",
                        help="the CoreNLP server on each node (default: %(default)s)")
    sifter.add_argument("--seed", type=int, default=0,
                        help="seed of the random triple choice, per row (default: 0)")
    sifter.add_argument("--triple", default="random", choices=["random", "longest"],
                        help="which OpenIE triple is the backbone (default: random, as the paper)")
    sifter.add_argument("--min-words", type=int, default=3,
                        help="drop sentences with fewer words (default: 3)")
    sifter.add_argument("--keep-short", action="store_true", help="turn the length rule off")
    sifter.add_argument("--keep-capitalized-tail", action="store_true",
                        help="turn off the rule that drops a sentence whose last word is "
                             "capitalized together with the next one")
    sifter.add_argument("--max-parse-chars", type=int, default=1000,
                        help="parse a truncated copy of longer texts (default: 1000)")
    sifter.add_argument("--openie-entailment", action="store_true",
                        help="run triplet-extract's natural-logic entailment stage (slower)")
    add_pool_args(parser, actors=2, rows_per_batch=256)
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup_logging(args.verbose)
    try:
        config = AugmentConfig(
            corpus=corpus_config_from_args(args), output=args.output, rejects=args.rejects,
            backend=args.backend, corenlp_url=args.corenlp_url, triple_choice=args.triple, seed=args.seed,
            min_words=args.min_words, drop_short=not args.keep_short,
            drop_capitalized_tail=not args.keep_capitalized_tail,
            max_parse_chars=args.max_parse_chars, openie_entailment=args.openie_entailment,
            pool=pool_config_from_args(args))
        logger.info("config: %s", config)
        summary = run_augmentation(config)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    brief = {k: summary[k] for k in ("sources", "rows_in", "rows_out", "rows_rejected",
                                      "rejected_by_reason", "backbone_source",
                                      "sentences_per_second", "seconds")}
    print(json.dumps(brief))
    return summary


if __name__ == "__main__":
    main()
