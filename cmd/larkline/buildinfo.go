package main

import (
	goruntime "runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/schemas/ids"
)

// buildInfo is larkline_build_info{version, goversion, roles} = 1: the version a
// process runs (what the dashboard's version variable lists) and its roles.
func buildInfo(roles []ids.Stage) prometheus.Collector {
	info, _ := debug.ReadBuildInfo()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "larkline_build_info",
		Help: "Always 1: the running build's version and Go version, and the process's roles.",
	}, []string{"version", "goversion", "roles"})
	g.WithLabelValues(buildVersion(version, info), goruntime.Version(), joinRoles(roles, ",")).Set(1)
	return g
}
