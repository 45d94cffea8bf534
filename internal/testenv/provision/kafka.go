package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/reaper"
)

const (
	kafkaReadyTimeout = 60 * time.Second
	jvmScript         = "deploy/kafka/kafka-jvm.sh"
)

// kafkaReady waits until the brokers answer a metadata request naming at
// least one broker and a controller.
func kafkaReady(ctx context.Context, s *Service) error {
	brokers := s.Brokers()
	if len(brokers) == 0 {
		return fmt.Errorf("%w: no brokers in %q", ErrBadEnv, s.Endpoint)
	}
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyTimeout)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("larkline-testenv"),
		kgo.DialTimeout(5*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	)
	if err != nil {
		return fmt.Errorf("creating a kafka client for %v: %w", brokers, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		m, err := adm.BrokerMetadata(ctx)
		if err == nil && len(m.Brokers) > 0 && m.Controller >= 0 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("metadata names %d brokers and controller %d", len(m.Brokers), m.Controller)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka at %v did not answer within %s: %w", brokers, kafkaReadyTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startKafkaEmbedded starts an in-process kfake cluster of one broker.
func startKafkaEmbedded(_ context.Context, _ Options) (*Service, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	return newService(kafkaSpec, KindEmbedded, strings.Join(c.ListenAddrs(), ","), func(context.Context) error {
		c.Close()
		return nil
	}), nil
}

// startKafkaJVM runs deploy/kafka/kafka-jvm.sh start in a fresh temporary
// directory on two free ports.
func startKafkaJVM(ctx context.Context, o Options) (*Service, error) {
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
	reap, err := reaper.Start(`bash "$1" stop "$2" >/dev/null 2>&1; rm -rf "$2"`, script, dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	stopBroker := func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, bash, script, "stop", dir)
		cmd.Env = env
		_, err := runLogged(cmd)
		return err
	}
	stop := stopChain(stopBroker, removeDir(dir), cancelReaper(reap))

	cmd := exec.CommandContext(ctx, bash, script, "start", dir, strconv.Itoa(ports[0]), strconv.Itoa(ports[1]))
	cmd.Env = env
	out, err := runLogged(cmd)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting the broker: %w", err), stop(context.WithoutCancel(ctx)))
	}
	o.logger().Info("provision: kafka-jvm.sh", "output", strings.TrimSpace(tail(string(out), 3)))
	return newService(kafkaSpec, KindJVM, "127.0.0.1:"+strconv.Itoa(ports[0]), stop), nil
}

// javaAvailable reports ErrUnavailable when no java can be found the way
// kafka-jvm.sh looks for it (JAVA, JAVA_HOME, PATH).
func javaAvailable() error {
	switch {
	case os.Getenv("JAVA") != "":
		if _, err := exec.LookPath(os.Getenv("JAVA")); err != nil {
			return unavailable("JAVA=%s: %v", os.Getenv("JAVA"), err)
		}
	case os.Getenv("JAVA_HOME") != "":
		if _, err := os.Stat(filepath.Join(os.Getenv("JAVA_HOME"), "bin", "java")); err != nil {
			return unavailable("JAVA_HOME has no bin/java: %v", err)
		}
	default:
		if _, err := exec.LookPath("java"); err != nil {
			return unavailable("java not found on PATH (the jvm broker needs Java 17+)")
		}
	}
	return nil
}

// jarsFetchable reports ErrUnavailable when the jar cache is incomplete and
// there is no Maven to fill it.
// prepareScript finds what a service script of deploy/ needs before it can start:
// Java, bash, the script (rel, from the repository root) and its jars, fetched once
// into their cache (jarsEnv, when set in o, overrides the cache directory). It returns
// bash, the script's path and the environment to run it with.
func prepareScript(ctx context.Context, o Options, rel, jarsEnv string) (bash, script string, env []string, err error) {
	if err := javaAvailable(); err != nil {
		return "", "", nil, err
	}
	if bash, err = exec.LookPath("bash"); err != nil {
		return "", "", nil, unavailable("bash not found: %v", err)
	}
	root, err := repoRoot(o)
	if err != nil {
		return "", "", nil, err
	}
	script = filepath.Join(root, rel)
	if _, err := os.Stat(script); err != nil {
		return "", "", nil, unavailable("%v", err)
	}
	env = os.Environ()
	if jars := o.getenv(jarsEnv); jars != "" {
		env = append(env, jarsEnv+"="+jars)
	}
	if err := jarsFetchable(ctx, bash, script, env); err != nil {
		return "", "", nil, err
	}
	return bash, script, env, nil
}

func jarsFetchable(ctx context.Context, bash, script string, env []string) error {
	cmd := exec.CommandContext(ctx, bash, script, "jars")
	cmd.Env = env
	out, err := runLogged(cmd)
	if err != nil {
		return err
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return nil
	}
	mvn := "mvn"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MVN="); ok && v != "" {
			mvn = v
		}
	}
	if _, err := exec.LookPath(mvn); err != nil {
		return unavailable("the broker jars are not cached in %s and Maven (%s) is not installed to fetch them", dir, mvn)
	}
	return nil
}
