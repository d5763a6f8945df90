"""The ``headwater`` data source: entry points Spark calls, each validating its options
before anything runs, so mistakes fail at planning time with the option named."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .cluster import check_client_properties
from .credentials import check_credentials
from .executor import consumer_config
from .options import (
    HeadwaterOptionError,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from .schema import same_shape, source_schema
from .share_options import is_share_source, parse_share_options
from .share_source import HeadwaterShareStreamReader, share_schema
from .sink import (
    HeadwaterBatchWriter,
    HeadwaterStreamWriter,
    default_prefix,
    producer_config,
    validate_sink_schema,
)
from .source import HeadwaterBatchReader, HeadwaterStreamReader


class DefaultSource(DataSource):
    """Kafka-compatible source and sink over confluent-kafka: ``format("headwater")``.

    Spark instantiates this class several times per query in different processes, so
    construction and ``schema()`` do no network I/O; ``reader()`` & co. open one
    connection to check TLS trust and SASL credentials (``credentials.py``).
    """

    @classmethod
    def name(cls) -> str:
        return "headwater"

    def _source(self, streaming: bool | None) -> SourceOptions:
        opts = parse_source_options(dict(self.options), streaming)
        check_client_properties(consumer_config(opts), "consumer")
        if streaming is not None:  # reader(), streamReader(): planning, once per query
            check_credentials(opts.client_config)
        return opts

    def _share(self, streaming: bool | None):
        opts = parse_share_options(dict(self.options), streaming)
        check_client_properties(consumer_config(opts.read), "consumer")
        if streaming is not None:
            check_credentials(opts.read.client_config)
        return opts

    def schema(self) -> StructType:
        if is_share_source(self.options):
            return share_schema(self._share(None).read.include_headers)
        return source_schema(self._source(None).include_headers)

    def _check_schema(self, schema: StructType, opts: SourceOptions) -> None:
        if not same_shape(schema, source_schema(opts.include_headers)):
            raise HeadwaterOptionError("The headwater source has a fixed schema and cannot be "
                                       "set with a custom one")

    def reader(self, schema: StructType) -> DataSourceReader:
        if is_share_source(self.options):
            self._share(False)  # refused with a message saying why
        opts = self._source(False)
        self._check_schema(schema, opts)
        return HeadwaterBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if is_share_source(self.options):
            share = self._share(True)
            if not same_shape(schema, share_schema(share.read.include_headers)):
                raise HeadwaterOptionError("The headwater source has a fixed schema and "
                                           "cannot be set with a custom one")
            return HeadwaterShareStreamReader(share, schema)
        opts = self._source(True)
        self._check_schema(schema, opts)
        return HeadwaterStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise HeadwaterOptionError("Save mode Overwrite is not allowed for the headwater "
                                       "sink: records can only be appended. Use mode "
                                       "'append'.")
        opts = parse_sink_options(dict(self.options))
        validate_sink_schema(schema, opts)
        check_client_properties(producer_config(opts), "producer")
        check_credentials(opts.client_config)
        return HeadwaterBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_sink_options(dict(self.options))
        validate_sink_schema(schema, opts)
        check_client_properties(producer_config(opts), "producer")
        check_credentials(opts.client_config)
        if opts.exactly_once:
            default_prefix(opts)  # fails now if there is no stable identity
        return HeadwaterStreamWriter(opts)
