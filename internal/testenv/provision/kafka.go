package provision

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	if err := brokerReady(ctx, kadm.NewClient(cl), nil); err != nil {
		return fmt.Errorf("kafka at %v did not answer within %s: %w", brokers, kafkaReadyTimeout, err)
	}
	return nil
}

// brokerReady asks adm, for at most kafkaReadyTimeout, until the metadata names a
// broker and a controller and then check (when set) passes; it returns the last
// failure.
func brokerReady(ctx context.Context, adm *kadm.Client, check func(context.Context, *kadm.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyTimeout)
	defer cancel()
	for {
		m, err := adm.BrokerMetadata(ctx)
		if err == nil && (len(m.Brokers) == 0 || m.Controller < 0) {
			err = fmt.Errorf("metadata names %d brokers and controller %d", len(m.Brokers), m.Controller)
		}
		if err == nil && check != nil {
			err = check(ctx, adm)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
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

// startKafkaJVM runs a KafkaProcess, the broker of deploy/kafka/kafka-jvm.sh in a
// fresh temporary directory on two free ports, as the jvm kind's Service.
func startKafkaJVM(ctx context.Context, o Options) (*Service, error) {
	kp, err := StartKafkaProcess(ctx, o)
	if err != nil {
		return nil, err
	}
	return newService(kafkaSpec, KindJVM, kp.Brokers[0], kp.Close), nil
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
