"""xtts_data: corpus ingest, a verified feature cache and a fixed-shape tf.data pipeline.

`prepare` turns a corpus into TFRecord shards of mel features and token ids once;
`make_dataset` reads them back in batches of at most K static shapes, listed up front by
a `DatasetSpec`, with no Python op in the graph; `make_segment_dataset` cuts aligned
mel/waveform segments of one static shape for a vocoder (`SegmentSpec`); `diagnose` tells
whether input is the bottleneck.

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_data` does not
import TensorFlow.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_data._audio_io import load_audio
    from xtts_data._transcripts import Transcripts, read_transcripts
    from xtts_data.buckets import BatchShape, plan_shapes
    from xtts_data.cache import PrepareResult, format_summary, prepare
    from xtts_data.clips import BadAudioError
    from xtts_data.config import DataConfig, load_config
    from xtts_data.corpus import Corpus, Row, Skipped, read_corpus
    from xtts_data.demo_corpus import DEMO_SENTENCES, DemoCorpus, speak_demo, write_demo_corpus
    from xtts_data.derive import derive_mels
    from xtts_data.doctor import DoctorReport, diagnose, python_ops
    from xtts_data.errors import (
        CacheError,
        ConfigError,
        CorpusError,
        EmptySplitError,
        LockError,
        OutputExistsError,
        XttsDataError,
    )
    from xtts_data.manifest import FeatureCache
    from xtts_data.pipeline import DataPipeline, DatasetSpec, is_validation, make_dataset
    from xtts_data.segments import (
        SegmentPipeline,
        SegmentShape,
        SegmentSpec,
        make_segment_dataset,
    )
    from xtts_data.sentences import Piece, split_text
    from xtts_data.service import start_dispatcher, start_worker
    from xtts_data.text import TextConfig, Tokenizer, normalize_text, normalize_texts, text_to_ids
    from xtts_data.utterances import Utterance, read_utterances
    from xtts_data.verify import verify_cache

__all__ = [
    "DEMO_SENTENCES",
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
    "EmptySplitError",
    "FeatureCache",
    "LockError",
    "OutputExistsError",
    "Piece",
    "PrepareResult",
    "Row",
    "SegmentPipeline",
    "SegmentShape",
    "SegmentSpec",
    "Skipped",
    "TextConfig",
    "Tokenizer",
    "Transcripts",
    "Utterance",
    "XttsDataError",
    "derive_mels",
    "diagnose",
    "format_summary",
    "is_validation",
    "load_audio",
    "load_config",
    "make_dataset",
    "make_segment_dataset",
    "normalize_text",
    "normalize_texts",
    "plan_shapes",
    "prepare",
    "python_ops",
    "read_corpus",
    "read_transcripts",
    "read_utterances",
    "speak_demo",
    "split_text",
    "start_dispatcher",
    "start_worker",
    "text_to_ids",
    "verify_cache",
    "write_demo_corpus",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BadAudioError": "clips",
        "load_audio": "_audio_io",
        **dict.fromkeys(["Transcripts", "read_transcripts"], "_transcripts"),
        **dict.fromkeys(["BatchShape", "plan_shapes"], "buckets"),
        **dict.fromkeys(["PrepareResult", "format_summary", "prepare"], "cache"),
        "derive_mels": "derive",
        **dict.fromkeys(["DataConfig", "load_config"], "config"),
        **dict.fromkeys(["Corpus", "Row", "Skipped", "read_corpus"], "corpus"),
        **dict.fromkeys(["DEMO_SENTENCES", "DemoCorpus", "speak_demo", "write_demo_corpus"],
                        "demo_corpus"),
        **dict.fromkeys(["DoctorReport", "diagnose", "python_ops"], "doctor"),
        **dict.fromkeys(["CacheError", "ConfigError", "CorpusError", "EmptySplitError",
                         "LockError", "OutputExistsError", "XttsDataError"],
                        "errors"),
        "FeatureCache": "manifest",
        "verify_cache": "verify",
        **dict.fromkeys(["DataPipeline", "DatasetSpec", "is_validation", "make_dataset"],
                        "pipeline"),
        **dict.fromkeys(["SegmentPipeline", "SegmentShape", "SegmentSpec",
                         "make_segment_dataset"], "segments"),
        **dict.fromkeys(["start_dispatcher", "start_worker"], "service"),
        **dict.fromkeys(["Piece", "split_text"], "sentences"),
        **dict.fromkeys(["TextConfig", "Tokenizer", "normalize_text", "normalize_texts",
                         "text_to_ids"], "text"),
        **dict.fromkeys(["Utterance", "read_utterances"], "utterances"),
    },
)  # fmt: skip
