package provision

import (
	"context"
	"strconv"
)

// KafkaProcess is a single-node KRaft broker run by kafka-jvm.sh on fixed loopback
// ports with its log in its own directory, for a test that stops and starts the
// broker (an outage). Stop and Start restart it in place: the same address, the same
// topics, records and committed offsets. It is safe for concurrent use.
type KafkaProcess struct {
	// Brokers is the bootstrap list, one 127.0.0.1:<port>.
	Brokers []string
	*scriptProc
}

// StartKafkaProcess starts a broker of its own in a fresh temporary directory on
// two free ports (broker, controller) and waits until it answers a metadata request.
func StartKafkaProcess(ctx context.Context, o Options) (*KafkaProcess, error) {
	if err := javaAvailable(); err != nil {
		return nil, err
	}
	var brokers []string
	sp, err := startScriptProc(ctx, o, "broker", jvmScript, EnvKafkaJars, 2, 2,
		func(_ string, ports []int) ([]string, func(context.Context) error, error) {
			brokers = []string{"127.0.0.1:" + strconv.Itoa(ports[0])}
			return nil, func(ctx context.Context) error { return kafkaReady(ctx, &Service{Endpoint: brokers[0]}) }, nil
		})
	if err != nil {
		return nil, err
	}
	o.logger().Info("provision: kafka-jvm.sh (private broker)", "brokers", brokers[0])
	return &KafkaProcess{Brokers: brokers, scriptProc: sp}, nil
}
