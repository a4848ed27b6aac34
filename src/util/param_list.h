/*
 * Every parameter zinc reads, in one list: field, type, ZINC_ name, NCCL_ fallback name (or
 * NULL), default, documentation. Values come from the environment, then from the file named
 * by ZINC_CONF_FILE (default ~/.zinc.conf), then the default. `zinc-info` prints this table.
 *
 * Only the util layer parses them; every layer reads the typed values through zn_params().
 */
/* clang-format off */
ZN_PARAM(debug,         STR,  "ZINC_DEBUG",         "NCCL_DEBUG",         "WARN",
         "log level: NONE, VERSION, WARN, INFO or TRACE")
ZN_PARAM(debug_subsys,  STR,  "ZINC_DEBUG_SUBSYS",  "NCCL_DEBUG_SUBSYS",  "ALL",
         "subsystems to log: INIT,BOOT,NET,SHM,P2P,PROXY,COLL,TUNE,ENV,ALLOC,CALL,GRAPH or ALL; a leading ^ excludes")
ZN_PARAM(debug_file,    STR,  "ZINC_DEBUG_FILE",    "NCCL_DEBUG_FILE",    "",
         "write the log to this file instead of stderr; %h is the host name, %p the pid")
ZN_PARAM(timeout,       INT,  "ZINC_TIMEOUT",       NULL,                 "600",
         "seconds any wait (init, collective, finalize) may go without progress before it fails")
ZN_PARAM(comm_id,       STR,  "ZINC_COMM_ID",       "NCCL_COMM_ID",       "",
         "host:port of the bootstrap root; rank 0 hosts it and ncclGetUniqueId returns the same id on every rank")
ZN_PARAM(job_secret,    STR,  "ZINC_JOB_SECRET",    NULL,                 "",
         "a secret shared by the ranks of a ZINC_COMM_ID job (zinc-run draws one; pass it with mpirun -x / srun --export): every bootstrap connection proves it by challenge-response; unset: anyone who knows ZINC_COMM_ID can join")
ZN_PARAM(socket_ifname, STR,  "ZINC_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "",
         "interfaces to use: prefixes separated by commas; ^ excludes, = matches exactly; default: any but lo and docker*")
ZN_PARAM(socket_family, STR,  "ZINC_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", "",
         "AF_INET or AF_INET6 to restrict the address family; default: IPv4 first, then IPv6")
ZN_PARAM(net_chunk,     SIZE, "ZINC_NET_CHUNK",     NULL,                 "512K",
         "bytes per chunk in flight on a net-transport connection (and per staging slot, on nets other than the socket net)")
ZN_PARAM(net_slots,     INT,  "ZINC_NET_SLOTS",     NULL,                 "4",
         "staging slots per direction of a net-transport connection (2-16): chunks in flight at once")
ZN_PARAM(net,           STR,  "ZINC_NET",           "NCCL_NET",           "",
         "net to use by name (see zinc-info), e.g. Socket; default: the first usable one, plugin nets before built-in ones")
ZN_PARAM(net_plugin,    STR,  "ZINC_NET_PLUGIN",    "NCCL_NET_PLUGIN",    "",
         "net plugin: a name (loads libnccl-net-NAME.so), a path, or none; default: libnccl-net.so if it can be loaded")
ZN_PARAM(net_plugin_version, INT, "ZINC_NET_PLUGIN_VERSION", NULL,           "12",
         "newest ncclNetPlugin_vN table to take from a plugin (6-12); lower values test zinc's adapters for older plugins")
ZN_PARAM(socket_nthreads, INT, "ZINC_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", "-1",
         "helper threads per socket-net connection (0-16); 0: the thread that polls moves the data on the control stream; -1 (auto): 2 where the process may run on 8 or more CPUs, else 0; messages up to 64 KB always travel on the control stream")
ZN_PARAM(nsocks_perthread, INT, "ZINC_NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD", "1",
         "data streams (TCP connections) per helper thread of a socket-net connection; threads x streams <= 64")
ZN_PARAM(shm_disable,   BOOL, "ZINC_SHM_DISABLE",   "NCCL_SHM_DISABLE",   "0",
         "1: ranks on the same host talk through the net transport instead of shared memory")
ZN_PARAM(transport,     STR,  "ZINC_TRANSPORT",     NULL,                 "auto",
         "auto (shm within a host, the net transport between hosts), net (the net transport everywhere) or socket (the net transport over the socket net everywhere)")
ZN_PARAM(hostid,        STR,  "ZINC_HOSTID",        "NCCL_HOSTID",        "",
         "override the host identity; ranks with equal ids are on one host (default: host name, boot id, network namespace); a comma-separated list gives rank r of a communicator the id at r mod its length (several hosts in one process, for tests)")
ZN_PARAM(device,        STR,  "ZINC_DEVICE",        NULL,                 "auto",
         "communicator kind: auto (cuda when the thread has a usable GPU), host or cuda")
ZN_PARAM(algo,          STR,  "ZINC_ALGO",          NULL,                 "",
         "force an algorithm by name (see zinc-info); default: the cost model picks per call")
ZN_PARAM(proto,         STR,  "ZINC_PROTO",         NULL,                 "",
         "force a GPU protocol: LL or SIMPLE; default: the cost model picks")
ZN_PARAM(shm_slot_size, SIZE, "ZINC_SHM_SLOT_SIZE", NULL,                 "1M",
         "bytes of each rank's slot in the shared-memory arena of a host communicator")
ZN_PARAM(shm_fifo_size, SIZE, "ZINC_SHM_FIFO_SIZE", NULL,                 "1M",
         "bytes of each direction of a shared-memory point-to-point connection")
ZN_PARAM(chunk_size,    SIZE, "ZINC_CHUNK_SIZE",    NULL,                 "512K",
         "pipelining chunk of the point-to-point algorithms (ring) on host memory")
ZN_PARAM(spin,          INT,  "ZINC_SPIN",          NULL,                 "-1",
         "polls before a waiting thread yields the CPU; -1: chosen from the cores and local ranks")
ZN_PARAM(conf_file,     STR,  "ZINC_CONF_FILE",     NULL,                 "",
         "parameter file (NAME=VALUE lines); default ~/.zinc.conf")
ZN_PARAM(p2p_disable,   BOOL, "ZINC_P2P_DISABLE",   "NCCL_P2P_DISABLE",   "0",
         "1: GPUs do not access each other's memory; data is staged through host memory")
ZN_PARAM(p2p_ipc,       BOOL, "ZINC_P2P_IPC",       NULL,                 "0",
         "1: GPU arenas are cudaMalloc memory shared through CUDA IPC handles, the fallback for drivers that cannot export cuMem memory as file descriptors")
ZN_PARAM(p2p_topo,      STR,  "ZINC_P2P_TOPO",      NULL,                 "auto",
         "auto: GPUs that all reach each other use direct kernels, others a GPU ring where one exists; ring: map only ring neighbours as if no other pair could reach each other")
ZN_PARAM(gpu_channels,  INT,  "ZINC_GPU_CHANNELS",  NULL,                 "128",
         "most channels (thread blocks) a GPU kernel of a cuda communicator uses, 1-128; the arena has a FIFO per channel and peer")
ZN_PARAM(gpu_p2p_channels, INT, "ZINC_GPU_P2P_CHANNELS", NULL,             "128",
         "most channels (thread blocks) one send or receive of a cuda communicator uses, 1-128 (at most ZINC_GPU_CHANNELS); a message takes one channel per 32 KB")
ZN_PARAM(gpu_p2p_ll,    SIZE, "ZINC_GPU_P2P_LL",    NULL,                 "512K",
         "sends and receives between GPUs of one host up to this many bytes travel as LL messages (data and flags in 16-byte stores, no fence; a channel per 16 KB, at most ZINC_GPU_P2P_CHANNELS) instead of through the FIFOs; 0-512K, 0: never")
ZN_PARAM(gpu_slot_size, SIZE, "ZINC_GPU_SLOT_SIZE", NULL,                 "256K",
         "bytes of each FIFO slot of a cuda communicator's arena (64K-4M); large collectives move data in windows of this size per channel")
ZN_PARAM(gpu_net,       STR,  "ZINC_GPU_NET",       NULL,                 "auto",
         "cuda communicators across hosts: auto runs every collective and send/recv as GPU kernels whose FIFOs between hosts the proxy carries over the net (where every two GPUs of a host reach each other; where only a chain of them does, as ring: the ring collectives); ring carries only the ring's hops (allreduce, allgather, reducescatter, broadcast, reduce as kernels, the rest staged: fewer connections and less pinned memory); staged moves everything through host memory")
ZN_PARAM(gpu_net_channels, INT, "ZINC_GPU_NET_CHANNELS", NULL,            "2",
         "channels (thread blocks, and net connections per peer and direction between hosts) of the GPU kernels of a cuda communicator across hosts, 1-16")
ZN_PARAM(gpu_chunk,     SIZE, "ZINC_GPU_CHUNK",     NULL,                 "4K",
         "bytes per channel of a GPU collective (of each rank's piece in a two-shot allreduce) below which fewer channels are used")
ZN_PARAM(gpu_ll_chunk,  SIZE, "ZINC_GPU_LL_CHUNK",  NULL,                 "2K",
         "bytes of a small (LL) allreduce per channel, 512-8K: smaller spreads a call over more thread blocks")
ZN_PARAM(ib_disable,    BOOL, "ZINC_IB_DISABLE",    "NCCL_IB_DISABLE",    "0",
         "1: do not use InfiniBand/RoCE verbs devices")
ZN_PARAM(ib_hca,        STR,  "ZINC_IB_HCA",        "NCCL_IB_HCA",        "",
         "verbs devices to use: name[:port[:rail[:plane]]] prefixes separated by commas (mlx5_0:1,mlx5_1::0); ^ excludes, = matches names exactly; rail/plane go to the net's v12 properties; default: every active port")
ZN_PARAM(ib_gid_index,  INT,  "ZINC_IB_GID_INDEX",  "NCCL_IB_GID_INDEX",  "-1",
         "GID index of RoCE ports; -1: the first RoCE v2 IPv4-mapped GID, else the first RoCE v2, else index 0")
ZN_PARAM(ib_tc,         INT,  "ZINC_IB_TC",         "NCCL_IB_TC",         "0",
         "traffic class of IB/RoCE packets (the GRH's traffic class, DSCP << 2 on RoCE)")
ZN_PARAM(ib_sl,         INT,  "ZINC_IB_SL",         "NCCL_IB_SL",         "0",
         "InfiniBand service level (0-15)")
ZN_PARAM(ib_timeout,    INT,  "ZINC_IB_TIMEOUT",    "NCCL_IB_TIMEOUT",    "20",
         "queue pair ACK timeout exponent: 4.096 us * 2^value per try (1-31)")
ZN_PARAM(ib_retry_cnt,  INT,  "ZINC_IB_RETRY_CNT",  "NCCL_IB_RETRY_CNT",  "7",
         "queue pair transport retries before a request fails (0-7)")
ZN_PARAM(ib_qps_per_conn, INT, "ZINC_IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION", "1",
         "reliable-connected queue pairs per connection that requests are spread over (1-16)")
ZN_PARAM(ib_dmabuf,     BOOL, "ZINC_DMABUF_ENABLE", "NCCL_DMABUF_ENABLE", "1",
         "register GPU memory exported as dmabuf with ibv_reg_dmabuf_mr where the kernel and NIC support it")
ZN_PARAM(net_gdr_level, STR,  "ZINC_NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL", "PXB",
         "GPUDirect RDMA: the farthest PCI path between a GPU and its net device at which the net moves the GPU's memory directly: LOC (never), PIX (one PCIe switch), PXB (several switches), PHB (through the CPU), SYS (anywhere); legacy numbers 0-4; needs a net that reports NCCL_PTR_CUDA")
ZN_PARAM(net_gdr_read,  BOOL, "ZINC_NET_GDR_READ",  "NCCL_NET_GDR_READ",  "1",
         "with GPUDirect RDMA, also send from GPU memory (the NIC reads it); 0: only receives land in GPU memory")
ZN_PARAM(ibverbs_lib,   STR,  "ZINC_IBVERBS_LIB",   NULL,                 "",
         "tests only: load this library instead of libibverbs.so.1 (tests/ibemu's emulation)")
ZN_PARAM(proxy_dump_signal, INT, "ZINC_PROXY_DUMP_SIGNAL", "NCCL_PROXY_DUMP_SIGNAL", "0",
         "signal number that makes the process print its state: every communicator (host ones too: rank, pending operation, peers), the proxy (clients, pending net ops, last progress); 0: off. zinc-info --dump PID sends it")
ZN_PARAM(proxy_cpus,    STR,  "ZINC_PROXY_CPUS",    NULL,                 "",
         "CPUs the proxy's progress thread and the GIN engine run on, a list such as 8-15; default: the process's, or every CPU the system allows when the process is bound to one CPU (mpirun --bind-to core): a proxy that serves kernels must not share a core with a main thread spinning in cudaStreamSynchronize")
ZN_PARAM(graph_mixing,  INT,  "ZINC_GRAPH_MIXING_SUPPORT", "NCCL_GRAPH_MIXING_SUPPORT", "",
         "overrides every communicator's config.graphUsageMode: 1 sets 2 (CUDA graphs mixed with eager calls), 0 sets 0; unset: the config decides")
ZN_PARAM(num_rma_ctx,   INT,  "ZINC_NUM_RMA_CTX",   "NCCL_NUM_RMA_CTX",   "",
         "overrides config.numRmaCtx: contexts of ncclPutSignal / ncclSignal / ncclWaitSignal per communicator (0 turns them off); unset: the config decides (default 1)")
ZN_PARAM(max_p2p_peers, INT,  "ZINC_MAX_P2P_PEERS", "NCCL_MAX_P2P_PEERS", "",
         "overrides config.maxP2pPeers: most peers a rank's send/recv works with at once; unset: the config decides (default: every rank)")
ZN_PARAM(graph_stream_ordering, INT, "ZINC_GRAPH_STREAM_ORDERING", "NCCL_GRAPH_STREAM_ORDERING", "",
         "overrides config.graphStreamOrdering: 1 orders the communicator's kernels captured in CUDA graphs after each other, 0 leaves it to the application; unset: the config decides (default 1)")
/* clang-format on */
