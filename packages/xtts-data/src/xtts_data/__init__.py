"""xtts_data: corpus ingest, a verified feature cache and a fixed-shape tf.data pipeline.

`prepare` turns a corpus into TFRecord shards of mel features and token ids once;
`make_dataset` reads them back in batches of at most K static shapes, listed up front by
a `DatasetSpec`, with no Python op in the graph; `diagnose` tells whether input is the
bottleneck.
"""

from xtts_data._audio_io import BadAudioError, load_audio
from xtts_data.buckets import BatchShape, plan_shapes
from xtts_data.cache import PrepareResult, format_summary, prepare
from xtts_data.config import DataConfig, load_config
from xtts_data.corpus import Corpus, Row, Skipped, read_corpus
from xtts_data.demo_corpus import DemoCorpus, write_demo_corpus
from xtts_data.doctor import DoctorReport, diagnose, python_ops
from xtts_data.errors import CacheError, ConfigError, CorpusError, XttsDataError
from xtts_data.manifest import FeatureCache, verify_cache
from xtts_data.pipeline import DataPipeline, DatasetSpec, is_validation, make_dataset
from xtts_data.service import start_dispatcher, start_worker
from xtts_data.text import TextConfig, Tokenizer, normalize_text, text_to_ids

__all__ = [
    "BadAudioError",
    "BatchShape",
    "CacheError",
    "ConfigError",
    "Corpus",
    "CorpusError",
    "DataConfig",
    "DataPipeline",
    "DatasetSpec",
    "DemoCorpus",
    "DoctorReport",
    "FeatureCache",
    "PrepareResult",
    "Row",
    "Skipped",
    "TextConfig",
    "Tokenizer",
    "XttsDataError",
    "diagnose",
    "format_summary",
    "is_validation",
    "load_audio",
    "load_config",
    "make_dataset",
    "normalize_text",
    "plan_shapes",
    "prepare",
    "python_ops",
    "read_corpus",
    "start_dispatcher",
    "start_worker",
    "text_to_ids",
    "verify_cache",
    "write_demo_corpus",
]
