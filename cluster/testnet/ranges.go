package testnet

// The port range of each package whose tests pick ports: disjoint, since
// `go test ./...` runs packages' tests at the same time, and below 32768
// (the kernel's ephemeral range starts there). A package that needs ports
// takes a range here, never one of its own.
var (
	Actors    = Range{Base: 20000, Span: 6000} // actors: test nodes and clusters
	Metastore = Range{Base: 26000, Span: 4000} // cluster/metastore: Raft addresses
	Narad     = Range{Base: 30000, Span: 2500} // cmd/narad: processes and dev clusters
	Deploy    = Range{Base: 17000, Span: 1000} // deploy: VictoriaMetrics, vmalert, nodes
	// NaradDev is cmd/narad's `narad dev` HTTP base ports: dev puts each
	// node's Raft port 10000 above its HTTP port, 18000-19999, which no
	// other range holds either.
	NaradDev = Range{Base: 8000, Span: 1900}
)
