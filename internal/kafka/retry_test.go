package kafka

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestIsRetryable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("producing evidence for ws/oc_x: %w", err) }
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readReset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	dnsNotFound := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "kafka.invalid", IsNotFound: true}}

	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"context canceled", context.Canceled, false},
		{"context canceled, wrapped", wrap(context.Canceled), false},
		{"deadline exceeded", context.DeadlineExceeded, true},
		{"deadline exceeded, wrapped", wrap(context.DeadlineExceeded), true},

		{"kerr retriable: not leader", kerr.NotLeaderForPartition, true},
		{"kerr retriable: not enough replicas", wrap(kerr.NotEnoughReplicas), true},
		{"kerr retriable: coordinator loading", kerr.CoordinatorLoadInProgress, true},
		{"kerr retriable: request timed out", kerr.RequestTimedOut, true},
		{"kerr not retriable: record too large", kerr.MessageTooLarge, false},
		{"kerr not retriable: topic authorization", wrap(kerr.TopicAuthorizationFailed), false},
		{"kerr not retriable: sasl failed", kerr.SaslAuthenticationFailed, false},
		{"kerr not retriable: invalid record", kerr.InvalidRecord, false},

		{"sarama retriable code", sarama.ErrNotLeaderForPartition, true},
		{"sarama retriable code, wrapped", wrap(sarama.ErrRequestTimedOut), true},
		{"sarama non-retriable code", sarama.ErrMessageSizeTooLarge, false},
		{"sarama out of brokers", sarama.ErrOutOfBrokers, true},
		{"sarama not connected", sarama.ErrNotConnected, true},
		{"sarama closed client", sarama.ErrClosedClient, false},
		{"sarama shutting down", sarama.ErrShuttingDown, false},

		{"franz-go record timeout", kgo.ErrRecordTimeout, true},
		{"franz-go record retries", wrap(kgo.ErrRecordRetries), true},
		{"franz-go max buffered", kgo.ErrMaxBuffered, true},
		{"franz-go client closed", kgo.ErrClientClosed, false},
		{"franz-go aborting", kgo.ErrAborting, false},

		{"eof", io.EOF, true},
		{"unexpected eof", wrap(io.ErrUnexpectedEOF), true},
		{"dial refused", dialRefused, true},
		{"read reset", wrap(readReset), true},
		{"broken pipe", syscall.EPIPE, true},
		{"network timeout", wrap(timeoutErr{}), true},
		{"dns host not found", dnsNotFound, false},
		{"certificate from unknown authority", wrap(x509.UnknownAuthorityError{}), false},

		{"joined, all retryable", errors.Join(kerr.NotLeaderForPartition, io.EOF), true},
		{"joined, one permanent", errors.Join(kerr.NotLeaderForPartition, kerr.TopicAuthorizationFailed), false},
		{"joined, one canceled", errors.Join(io.EOF, context.Canceled), false},
		{"unknown error", errors.New("something else"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsRetryable(tt.err); got != tt.want {
				t.Fatalf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
