// Package freeport hands out loopback TCP ports for servers that run in another
// process and must be told their port before they bind it: the test harness's Kafka
// broker, PostgreSQL and schema registry, the demo's PostgreSQL, and the larkline
// processes of the end-to-end tests.
//
// Asking the kernel for port 0 and closing the listener again is racy: the kernel
// hands the same range out as the local port of every outgoing connection (and of
// every other port-0 listener), so a busy test machine can take the port before the
// server binds it. A reserved port comes from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where neither happens, and is held with a lock
// file that every larkline process on the machine respects until it is released or
// its process exits; a port something else listens on is passed over.
package freeport
