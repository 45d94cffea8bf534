package main

import (
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
)

// kafkaOptions maps the kafka section onto internal/kafka's options, the client
// named <clientID>-<clientSuffix>.
func kafkaOptions(cfg *config.Config, clientSuffix string) mapped[kafka.Options] {
	k := cfg.Kafka
	id := k.ClientID
	if clientSuffix != "" {
		id += "-" + clientSuffix
	}
	m, o := newMapped[kafka.Options]()
	p, c := &o.Producer, &o.Consumer
	set(m, &o.Brokers, "kafka.brokers", k.Brokers)
	set(m, &o.ClientID, "kafka.clientID", id)
	set(m, &o.TLS.Enabled, "kafka.tls.enabled", k.TLS.Enabled)
	set(m, &o.TLS.CAFile, "kafka.tls.caFile", k.TLS.CAFile)
	set(m, &o.TLS.CertFile, "kafka.tls.certFile", k.TLS.CertFile)
	set(m, &o.TLS.KeyFile, "kafka.tls.keyFile", k.TLS.KeyFile)
	set(m, &o.TLS.ServerName, "kafka.tls.serverName", k.TLS.ServerName)
	set(m, &o.SASL.Mechanism, "kafka.sasl.mechanism", string(k.SASL.Mechanism))
	set(m, &o.SASL.Username, "kafka.sasl.username", k.SASL.Username)
	set(m, &o.SASL.Password, "kafka.sasl.password", k.SASL.Password.Value())
	set(m, &o.SASL.OAuth.TokenFile, "kafka.sasl.oauth.tokenFile", k.SASL.OAuth.TokenFile)
	set(m, &o.SASL.OAuth.TokenURL, "kafka.sasl.oauth.tokenURL", k.SASL.OAuth.TokenURL)
	set(m, &o.SASL.OAuth.ClientID, "kafka.sasl.oauth.clientID", k.SASL.OAuth.ClientID)
	set(m, &o.SASL.OAuth.ClientSecret, "kafka.sasl.oauth.clientSecret", k.SASL.OAuth.ClientSecret.Value())
	set(m, &o.SASL.OAuth.Scope, "kafka.sasl.oauth.scope", k.SASL.OAuth.Scope)
	set(m, &o.AllowInsecure, "allowInsecure", cfg.AllowInsecure)
	set(m, &p.Acks, "kafka.producer.acks", kafka.Acks(k.Producer.Acks))
	set(m, &p.DisableIdempotence, "kafka.producer.idempotent", !k.Producer.Idempotent)
	set(m, &p.Linger, "kafka.producer.linger", new(k.Producer.Linger)) // 0: send at once
	set(m, &p.MaxBufferedRecords, "kafka.producer.maxBufferedRecords", k.Producer.MaxBufferedRecords)
	set(m, &p.Compression, "kafka.producer.compression", kafka.Compression(k.Producer.Compression))
	// any producer may park a large record in the dead-letter topic
	add(m, &p.LargeRecordTopics, "kafka.topics.deadLetter", k.Topics.DeadLetter)
	add(m, &p.LargeRecordTopics, "kafka.topics.windowsClosed", k.Topics.WindowsClosed)
	set(m, &c.SessionTimeout, "kafka.consumer.sessionTimeout", k.Consumer.SessionTimeout)
	set(m, &c.RebalanceTimeout, "kafka.consumer.rebalanceTimeout", k.Consumer.RebalanceTimeout)
	set(m, &c.FetchMaxWait, "kafka.consumer.fetchMaxWait", k.Consumer.FetchMaxWait)
	return *m
}

// gokaOptions: the Kafka clients, franz-go's (the embedded Options) and Goka's.
func gokaOptions(cfg *config.Config, clientSuffix string) mapped[kafka.GokaOptions] {
	m, o := newMapped[kafka.GokaOptions]()
	nest(m, &o.Options, kafkaOptions(cfg, clientSuffix))
	set(m, &o.Version, "kafka.saramaVersion", cfg.Kafka.SaramaVersion)
	set(m, &o.TableReplication, "kafka.replicationFactor", int(cfg.Kafka.ReplicationFactor))
	set(m, &o.StreamReplication, "kafka.replicationFactor", int(cfg.Kafka.ReplicationFactor))
	set(m, &o.CheckTopicsOnly, "kafka.manageTopics", !cfg.Kafka.ManageTopics)
	return *m
}

// topicNames: larkline's topics.
func topicNames(cfg *config.Config) kafka.TopicNames {
	t := cfg.Kafka.Topics
	return kafka.TopicNames{
		Evidence: t.Evidence, Checkpoints: t.Checkpoints, Workspaces: t.Workspaces,
		WindowsClosed: t.WindowsClosed, DeadLetter: t.DeadLetter,
	}
}
