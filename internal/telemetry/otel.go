package telemetry

import (
	"strings"

	"github.com/prometheus/common/model"
)

// otel reads traces_service_graph_request_total (the OpenTelemetry Collector's servicegraph
// connector, Tempo's metrics-generator, Beyla) by client, server, connection_type and the
// namespace dimensions: client_k8s_namespace_name/server_k8s_namespace_name (the connector's
// "client_"/"server_" prefix on a k8s.namespace.name dimension, as Prometheus names it), else
// client_service_namespace/server_service_namespace (Beyla's, and a service.namespace
// dimension's). A virtual client on a virtual_node edge (the connector's "user" for a root
// span's caller, Tempo's peer attribute of it, the virtual_node="client" label) is a caller
// outside the traces: the server is an entrypoint. database and messaging_system edges are listed apart.
func (r *reader) otel(v model.Vector) {
	for _, s := range v {
		client, server, ct := label(s.Metric, "client"), label(s.Metric, "server"), label(s.Metric, "connection_type")
		if client == "" || server == "" {
			r.unnamed("otel-servicegraph: client or server missing: not an edge", s, Callee{})
			continue
		}
		var cns, sns string
		external := false
		for _, d := range otelNamespaceDims {
			if cns == "" {
				cns = label(s.Metric, d[0])
			}
			if sns == "" {
				sns = label(s.Metric, d[1])
			}
		}
		// Which side of a virtual node's edge was never seen: the client when the
		// virtual_node label says so (Tempo's enable_virtual_node_label, the connector's
		// virtual_node_extra_label; both off by default), else the side whose prefixed
		// dimension is missing (each span writes its own side's: the one seen has it; Tempo
		// names a root span's caller after its peer attribute, "mobile-app", no "user"), and
		// only where neither or both are there, the client when it is "user" (a root span with
		// no peer attribute). Before, "user" came first: a service named user (Sock Shop's)
		// calling its database or an uninstrumented service was read as a root span's caller,
		// its callee an entrypoint, its edge lost.
		virtualClient := false
		if ct == "virtual_node" {
			switch label(s.Metric, otelVirtualNodeLabel) {
			case "client":
				virtualClient = true
			case "server":
			default:
				switch {
				case cns != "" && sns == "":
				case cns == "" && sns != "":
					virtualClient = true
				default:
					// A root span's server is an instrumented service: one named after a
					// database system is the client span's db.system peer (Tempo's
					// unprefixed dimension says neither side).
					virtualClient = client == "user" && !dbSystems[strings.ToLower(server)]
				}
			}
		}
		// Tempo's unprefixed dimension: on a virtual node's edge only one span was seen (the
		// server's for a virtual client, else the client's), so it is that span's namespace; on
		// any other edge it is either side's (below).
		tempoNS := label(s.Metric, tempoNamespaceDim)
		if ct == "virtual_node" && tempoNS != "" {
			if virtualClient && sns == "" {
				sns = tempoNS
			} else if !virtualClient && cns == "" {
				cns = tempoNS
			}
		}
		if !printable(client) || !printable(server) || !printable(cns) || !printable(sns) || !printable(tempoNS) {
			// service.name is whatever a pod sets: a newline in it names no service.
			r.w.add("otel-servicegraph: a client, server or namespace with a control character or invalid UTF-8: not an edge", s.Metric)
			continue
		}
		why := ""
		if ct == "virtual_node" && !virtualClient {
			// A virtual server is a client span's peer whose server span never came (an
			// uninstrumented service, a database, a host outside): the connector names it
			// by the first of its peer attributes the span had (peer.service, db.name,
			// db.system by default), "unknown" when none.
			switch {
			case server == "unknown":
				r.w.add("otel-servicegraph: a virtual server node \"unknown\" (a client span whose server span never came, with none of the connector's peer attributes: peer.service, db.name, db.system): not an edge", s.Metric)
				continue
			case dbSystems[strings.ToLower(server)]:
				why = "a database peer (a virtual node named after the client span's db.system " + server + "): no HTTP retry applies"
			default:
				c, bad := peerHost(server, true)
				if bad != "" {
					r.w.add("otel-servicegraph: a virtual server node that is "+bad+": not an edge", s.Metric)
					continue
				}
				server = c.Name
				if c.Namespace != "" {
					sns = c.Namespace
				} else if strings.Contains(c.Name, ".") {
					sns = "" // a host outside the cluster: in no namespace
					external = true
				}
			}
		}
		if ct != "virtual_node" {
			// A server span's service.name; Beyla names a peer it cannot resolve by its
			// address: that is no Service.
			if _, why := peerHost(server, true); why == "an IP address, no Service" {
				r.w.add("otel-servicegraph: a server named by an IP address (a peer whose name was not resolved): not an edge", s.Metric)
				continue
			}
		}
		n := float64(s.Value)
		to := Callee{sns, server}
		if virtualClient {
			var buf [2]named
			if r.names("otel-servicegraph", "", s, calleeNames(buf[:0], to, "server", "the server's namespace")...) {
				r.addEntry(SourceOTel, to, Outside, n)
			}
			continue
		}
		if cns == "" && tempoNS != "" {
			r.w.add("otel-servicegraph: only Tempo's unprefixed k8s_namespace_name dimension (the namespace of whichever span of the pair came last: the client's and the server's are not known; set the metrics-generator's service_graphs enable_client_server_prefix: true): not an edge", s.Metric)
			continue
		}
		if cns == "" {
			r.w.add("otel-servicegraph: no client namespace dimension (configure the connector's dimensions: [k8s.namespace.name]): not an edge", s.Metric)
			continue
		}
		if sns == "" && !external {
			sns = cns // the connector saw both spans; without a dimension the server's is unknown: the client's is the likeliest
			to.Namespace = sns
			r.w.add("otel-servicegraph: no server namespace dimension: the server is taken to be in the client's namespace", s.Metric)
		}
		var buf [4]named
		ns := append(buf[:0], named{"the client's namespace", cns, kindNamespace}, named{"client", client, kindCaller})
		if !r.names("otel-servicegraph", "", s, calleeNames(ns, Callee{sns, server}, "server", "the server's namespace")...) {
			continue
		}
		switch ct {
		case "database":
			why = "a database call (connection_type database): no HTTP retry applies"
		case "messaging_system":
			why = "a messaging edge (connection_type messaging_system): no HTTP retry applies"
		}
		r.addEdge(SourceOTel, Caller{Namespace: cns, Name: client, Service: true}, to, n, 0, why)
	}
}

// dbSystems are the well-known values of OpenTelemetry's db.system attribute (semantic
// conventions 1.28, the attribute the servicegraph connector's default peer attributes read:
// connector/servicegraphconnector/connector.go defaultPeerAttributes, conventionsv128.DBSystemKey),
// with the newer db.system.name values: a virtual server node named by one of them is the
// database a client span called (a span without db.name, as semantic conventions 1.26 on
// write db.namespace instead), never a Service an HTTP retry applies to. Left out: "cache" and
// "progress" (deprecated values, and words a service is as likely named by).
var dbSystems = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Fields(`other_sql adabas intersystems_cache cassandra clickhouse
		cloudscape cockroachdb coldfusion cosmosdb couchbase couchdb db2 derby dynamodb edb
		elasticsearch filemaker firebird firebirdsql firstsql geode h2 h2database hanadb hbase hive
		hsqldb influxdb informix ingres instantdb interbase mariadb maxdb memcached mongodb mssql
		mssqlcompact mysql neo4j netezza opensearch oracle pervasive pointbase postgresql
		redis redshift spanner sqlite sybase teradata trino vertica
		softwareag.adabas actian.ingres aws.dynamodb aws.redshift azure.cosmosdb intersystems.cache
		gcp.spanner ibm.db2 ibm.informix ibm.netezza microsoft.sql_server oracle.db sap.hana sap.maxdb`) {
		m[s] = true
	}
	return m
}()
