package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
)

// KafkaProcess is a single-node KRaft broker run by kafka-jvm.sh on fixed loopback
// ports with its log in its own directory, for a test that stops and starts the
// broker (an outage). Stop and Start restart it in place: the same address, the same
// topics, records and committed offsets. It is safe for concurrent use.
type KafkaProcess struct {
	// Brokers is the bootstrap list, one 127.0.0.1:<port>.
	Brokers []string

	bash, script, dir string
	port, controller  int
	env               []string
	reap              *reaper

	mu        sync.Mutex
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// StartKafkaProcess starts a broker of its own in a fresh temporary directory on
// two free ports and waits until it answers.
func StartKafkaProcess(ctx context.Context, o Options) (*KafkaProcess, error) {
	if err := javaAvailable(); err != nil {
		return nil, err
	}
	bash, script, env, err := prepareScript(ctx, o, jvmScript, EnvKafkaJars)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "larkline-kafka-")
	if err != nil {
		return nil, fmt.Errorf("creating the broker directory: %w", err)
	}
	reap, err := startReaper(`bash "$1" stop "$2" >/dev/null 2>&1; rm -rf "$2"`, script, dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	kp := &KafkaProcess{
		Brokers: []string{"127.0.0.1:" + strconv.Itoa(ports[0])},
		bash:    bash, script: script, dir: dir, port: ports[0], controller: ports[1], env: env, reap: reap,
	}
	if err := kp.Start(ctx); err != nil {
		return nil, errors.Join(err, kp.Close(context.WithoutCancel(ctx)))
	}
	o.logger().Info("provision: kafka-jvm.sh (private broker)", "brokers", kp.Brokers[0])
	return kp, nil
}

// Start starts the broker (again) and waits until it answers a metadata request.
func (kp *KafkaProcess) Start(ctx context.Context) error {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if kp.closed {
		return errors.New("provision: broker already closed")
	}
	cmd := exec.CommandContext(ctx, kp.bash, kp.script, "start", kp.dir, strconv.Itoa(kp.port), strconv.Itoa(kp.controller))
	cmd.Env = kp.env
	if _, err := runLogged(cmd); err != nil {
		return fmt.Errorf("starting the broker: %w", err)
	}
	return kafkaReady(ctx, &Service{Endpoint: kp.Brokers[0]})
}

// Stop stops the broker and keeps its directory (and so its log) for Start.
func (kp *KafkaProcess) Stop(ctx context.Context) error {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return kp.stopLocked(ctx)
}

func (kp *KafkaProcess) stopLocked(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, kp.bash, kp.script, "stop", kp.dir)
	cmd.Env = kp.env
	_, err := runLogged(cmd)
	return err
}

// Close stops the broker and removes its directory. Later calls return the first
// call's result.
func (kp *KafkaProcess) Close(ctx context.Context) error {
	kp.closeOnce.Do(func() {
		kp.mu.Lock()
		defer kp.mu.Unlock()
		kp.closed = true
		kp.closeErr = stopChain(kp.stopLocked, removeDir(kp.dir), cancelReaper(kp.reap))(ctx)
	})
	return kp.closeErr
}
