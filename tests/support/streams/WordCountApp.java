// A Kafka Streams 4.4 word count for the tests (tests/support/streams_app.py compiles it
// once per source hash and runs it as a plain JVM): the smallest topology that exercises
// a streams group end to end. selectKey forces a repartition topic (two sub-topologies,
// so tasks of both kinds), count() keeps a persistent RocksDB store with a changelog, and
// exactly_once_v2 makes every commit a transaction over the input offsets, the
// repartition and changelog records and the output. With the cache off every update is
// emitted, so the output shows each word's counts 1, 2, ..., N exactly once when the
// guarantees hold, whatever instances crash, join or leave.
//
// Usage: WordCountApp --bootstrap HOST:PORT --application-id ID --input TOPIC
//          --output TOPIC --state-dir DIR [--protocol classic|streams] [--threads N]
//          [--standbys N] [--prop key=value]...
// Prints "STATE <new state>" on every state change, "TASKS active=[..] standby=[..]"
// when the tasks it runs change (checked every 200 ms while RUNNING) and
// "CLOSED <true|false>" after a close on SIGTERM (a shutdown hook), each line flushed,
// for the harness to wait on.

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public final class WordCountApp {

    private WordCountApp() {
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static Map<String, String> parse(String[] args, Properties extra) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length || !args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            String name = args[i].substring(2);
            if (name.equals("prop")) {
                String[] kv = args[i + 1].split("=", 2);
                if (kv.length != 2) {
                    throw new IllegalArgumentException("--prop takes key=value: " + args[i + 1]);
                }
                extra.setProperty(kv[0], kv[1]);
            } else {
                opts.put(name, args[i + 1]);
            }
        }
        for (String required : new String[] {"bootstrap", "application-id", "input", "output",
                                             "state-dir"}) {
            if (!opts.containsKey(required)) {
                throw new IllegalArgumentException("missing --" + required);
            }
        }
        return opts;
    }

    /** Print the instance's tasks whenever they change while it is RUNNING. */
    private static void reportTasks(KafkaStreams streams) {
        String last = "";
        while (true) {
            try {
                Thread.sleep(200);
                if (streams.state() != KafkaStreams.State.RUNNING) {
                    continue;
                }
                Set<String> active = new TreeSet<>();
                Set<String> standby = new TreeSet<>();
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    thread.activeTasks().forEach(t -> active.add(t.taskId().toString()));
                    thread.standbyTasks().forEach(t -> standby.add(t.taskId().toString()));
                }
                String line = "TASKS active=" + active + " standby=" + standby;
                if (!line.equals(last)) {
                    say(line);
                    last = line;
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                // no longer RUNNING or REBALANCING (closing): nothing to report
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Properties extra = new Properties();
        Map<String, String> opts = parse(args, extra);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.getOrDefault("protocol", "classic"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, opts.getOrDefault("threads", "1"));
        if (opts.containsKey("standbys")) {
            props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, opts.get("standbys"));
        }
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        props.putAll(extra);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(opts.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((key, word) -> word)
            .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
            .toStream()
            .to(opts.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(props), props);
        streams.setStateListener((newState, oldState) -> say("STATE " + newState));
        streams.setUncaughtExceptionHandler(exc -> {
            say("ERROR " + exc);
            exc.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean closed = streams.close(Duration.ofSeconds(30));
            say("CLOSED " + closed);
        }, "close-on-sigterm"));
        streams.start();
        Thread tasks = new Thread(() -> reportTasks(streams), "report-tasks");
        tasks.setDaemon(true);
        tasks.start();
    }
}
