package provision

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	dockerProbeTimeout = time.Second
	// Container ports of the Kafka image: 9093 is published to the host, 9092
	// is the in-container inter-broker listener, 9094 the controller.
	kafkaPublicPort = "9093/tcp"
	// The container's command waits for this file, which holds the advertised
	// listener (the host's mapped port, known only after start).
	kafkaStarterPath = "/tmp/larkline-kafka-start.sh"
)

// dockerEngine answers nil when a Docker engine, found the way
// testcontainers-go finds one (DOCKER_HOST, ~/.testcontainers.properties,
// the default and rootless sockets), answers a ping within a second.
func dockerEngine(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	// testcontainers panics in a few discovery paths when no host is found.
	defer func() {
		if r := recover(); r != nil {
			err = unavailable("no Docker engine answers: %v", r)
		}
	}()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return unavailable("no Docker engine answers: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return unavailable("no Docker engine answers: %v", err)
	}
	return nil
}

// tcLogger adapts testcontainers' Printf logging to the injected slog logger.
type tcLogger struct{ log *slog.Logger }

func (l tcLogger) Printf(format string, v ...any) {
	l.log.Debug("provision: testcontainers", "msg", strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// startKafkaDocker runs a single-node KRaft broker container.
func startKafkaDocker(ctx context.Context, o Options) (*Service, error) {
	if err := dockerEngine(ctx); err != nil {
		return nil, err
	}
	image := o.getenv(EnvKafkaImage)
	if image == "" {
		image = defaultKafkaImage
	}
	clusterID, err := kafkaClusterID()
	if err != nil {
		return nil, err
	}
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithLogger(tcLogger{o.logger()}),
		testcontainers.WithExposedPorts(kafkaPublicPort),
		testcontainers.WithEnv(map[string]string{
			"CLUSTER_ID":                                             clusterID,
			"KAFKA_NODE_ID":                                          "1",
			"KAFKA_PROCESS_ROLES":                                    "broker,controller",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                         "1@localhost:9094",
			"KAFKA_LISTENERS":                                        "PLAINTEXT://0.0.0.0:9093,BROKER://0.0.0.0:9092,CONTROLLER://0.0.0.0:9094",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                   "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":                       "BROKER",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                        "CONTROLLER",
			"KAFKA_NUM_PARTITIONS":                                   "1",
			"KAFKA_DEFAULT_REPLICATION_FACTOR":                       "1",
			"KAFKA_MIN_INSYNC_REPLICAS":                              "1",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                        "false",
		}),
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithCmd("-c", "while [ ! -f "+kafkaStarterPath+" ]; do sleep 0.1; done; exec bash "+kafkaStarterPath),
		testcontainers.WithLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostStarts: []testcontainers.ContainerHook{writeKafkaStarter},
		}),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("running %s: %w", image, err), testcontainers.TerminateContainer(ctr))
	}
	endpoint, err := ctr.PortEndpoint(ctx, kafkaPublicPort, "")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reading the broker's mapped port: %w", err), testcontainers.TerminateContainer(ctr))
	}
	return newService(kafkaSpec, KindDocker, endpoint, func(ctx context.Context) error {
		return testcontainers.TerminateContainer(ctr, testcontainers.StopContext(ctx))
	}), nil
}

// writeKafkaStarter, once the container runs and its port is mapped, writes
// the script that advertises the mapped host:port and starts the broker.
func writeKafkaStarter(ctx context.Context, c testcontainers.Container) error {
	if err := wait.ForMappedPort(kafkaPublicPort).WaitUntilReady(ctx, c); err != nil {
		return fmt.Errorf("waiting for the mapped port: %w", err)
	}
	endpoint, err := c.PortEndpoint(ctx, kafkaPublicPort, "PLAINTEXT")
	if err != nil {
		return fmt.Errorf("reading the mapped port: %w", err)
	}
	script := "#!/bin/bash\n" +
		"export KAFKA_ADVERTISED_LISTENERS='" + endpoint + ",BROKER://localhost:9092'\n" +
		"exec /etc/kafka/docker/run\n"
	if err := c.CopyToContainer(ctx, []byte(script), kafkaStarterPath, 0o755); err != nil {
		return fmt.Errorf("writing the starter script: %w", err)
	}
	return nil
}

// kafkaClusterID returns a random KRaft cluster id (a base64url Kafka Uuid).
func kafkaClusterID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("generating a cluster id: %w", err)
		}
		// Kafka's own generator avoids ids starting with '-' (they read as flags).
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id, nil
		}
	}
}

// startPostgresDocker runs a PostgreSQL container (fsync off).
func startPostgresDocker(ctx context.Context, o Options) (*Service, error) {
	if err := dockerEngine(ctx); err != nil {
		return nil, err
	}
	image := o.getenv(EnvPGImage)
	if image == "" {
		image = defaultPGImage
	}
	ctr, err := tcpostgres.Run(ctx, image,
		testcontainers.WithLogger(tcLogger{o.logger()}),
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithCmdArgs("-c", "max_connections=200", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("running %s: %w", image, err), testcontainers.TerminateContainer(ctr))
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reading the container's DSN: %w", err), testcontainers.TerminateContainer(ctr))
	}
	return newService(postgresSpec, KindDocker, dsn, func(ctx context.Context) error {
		return testcontainers.TerminateContainer(ctr, testcontainers.StopContext(ctx))
	}), nil
}
