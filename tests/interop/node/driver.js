#!/usr/bin/env node
// kafkajs 2.2.4 driver for kgroup's compatibility matrix (tests/interop/test_matrix_*.py).
// Speaks the language of tests/interop/test_matrix_drivers.py: one JSON argument, JSON lines
// on stdout (kafkajs' own log goes to stderr). Closing stdin stops gracefully.
//
//   node driver.js '{"role": "consumer", "bootstrap": ..., "group": ..., "topics": [...],
//                    "assignors": ["roundrobin"|"range"], "session_ms": 6000, "commit": "sync"}'
//   node driver.js '{"role": "producer", "bootstrap": ..., "topic": ..., "messages":
//                    [[key, value, partition|null]...], "idempotent": false}'
//   node driver.js '{"role": "admin", "bootstrap": ..., "group": ..., "topics": [...]}'
//   node driver.js '{"role": "transactional", "bootstrap": ..., "transactional_id": ..., "topic": ...,
//                    "transactions": [{"messages": [[key, value, partition]...], "offsets":
//                    {"group": g, "topic": t, "partitions": [[p, offset]...]}, "commit": true}...]}'
//
// Assignors: "roundrobin" is kafkajs' own RoundRobinAssigner (protocol name
// "RoundRobinAssigner"); "range" is a Java-compatible range assignor written against kafkajs'
// public PartitionAssigner API (protocol name "range"), so kafkajs can join mixed groups.
'use strict'
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel, PartitionAssigners, AssignerProtocol } = require('kafkajs')

const conf = JSON.parse(process.argv[2])

function emit(obj) {
  obj.t = Date.now() / 1000
  process.stdout.write(JSON.stringify(obj) + '\n')
}

const toStderr = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({
  clientId: conf.client_id || 'kafkajs-matrix',
  brokers: [conf.bootstrap],
  logLevel: logLevel[conf.log_level || 'INFO'],
  logCreator: toStderr,
  connectionTimeout: 3000,
  requestTimeout: conf.request_timeout_ms || 15000,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 30 },
})

// Java's RangeAssigner: per topic, members (sorted by member id) subscribed to it get
// consecutive ranges, the first ones one partition more.
const RangeAssigner = ({ cluster }) => ({
  name: 'range',
  version: 0,
  async assign({ members, topics }) {
    const subscriptions = {}
    for (const { memberId, memberMetadata } of members) {
      subscriptions[memberId] = AssignerProtocol.MemberMetadata.decode(memberMetadata).topics
    }
    const assignment = {}
    for (const { memberId } of members) assignment[memberId] = {}
    for (const topic of topics) {
      const consumers = members.map(m => m.memberId).filter(id => subscriptions[id].includes(topic)).sort()
      const partitions = cluster.findTopicPartitionMetadata(topic).map(m => m.partitionId).sort((a, b) => a - b)
      const per = Math.floor(partitions.length / consumers.length)
      const extra = partitions.length % consumers.length
      consumers.forEach((id, i) => {
        const start = per * i + Math.min(i, extra)
        const n = per + (i < extra ? 1 : 0)
        if (n > 0) assignment[id][topic] = partitions.slice(start, start + n)
      })
    }
    return members.map(({ memberId }) => ({
      memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 0, assignment: assignment[memberId] }),
    }))
  },
  protocol({ topics }) {
    return { name: this.name, metadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics }) }
  },
})

const ASSIGNERS = { roundrobin: PartitionAssigners.roundRobin, range: RangeAssigner }

function errorInfo(e) {
  return { type: e.type || e.name, msg: e.message, retriable: e.retriable }
}

function onStdinEnd(fn) {
  process.stdin.resume()
  process.stdin.on('end', fn)
  process.stdin.on('close', fn)
}

async function consumer() {
  const c = kafka.consumer({
    groupId: conf.group,
    sessionTimeout: conf.session_ms || 6000,
    rebalanceTimeout: conf.rebalance_timeout_ms || 30000,
    heartbeatInterval: conf.heartbeat_ms || 1000,
    partitionAssigners: (conf.assignors || ['roundrobin']).map(a => ASSIGNERS[a]),
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 30 },
    maxWaitTimeInMs: 200,
  })
  let owned = []
  const E = c.events
  c.on(E.GROUP_JOIN, ({ payload }) => {
    owned = Object.entries(payload.memberAssignment).flatMap(([t, ps]) => ps.map(p => [t, p]))
    owned.sort()
    emit({ ev: 'assigned', added: owned, owned, member: payload.memberId, gen: null, protocol: payload.groupProtocol,
           leader: payload.isLeader })
  })
  c.on(E.REBALANCING, () => emit({ ev: 'rebalancing' }))
  c.on(E.CRASH, ({ payload }) => emit({ ev: 'error', where: 'crash', ...errorInfo(payload.error),
                                        restart: payload.restart }))
  c.on(E.REQUEST_TIMEOUT, ({ payload }) => emit({ ev: 'request_timeout', api: payload.apiName }))
  let stopping = false
  onStdinEnd(async () => {
    if (stopping) return
    stopping = true
    try { await c.disconnect() } finally { emit({ ev: 'closed' }); process.exit(0) }
  })
  await c.connect()
  for (const topic of conf.topics) await c.subscribe({ topic, fromBeginning: true })
  emit({ ev: 'started' })
  await c.run({
    autoCommit: conf.commit === 'auto',
    eachBatchAutoResolve: true,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return
      const recs = batch.messages.map(m => [batch.topic, batch.partition, Number(m.offset), m.value.toString()])
      emit({ ev: 'records', recs })
      if ((conf.commit || 'sync') === 'sync') {
        const next = (BigInt(batch.lastOffset()) + 1n).toString()
        try {
          await c.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }])
          emit({ ev: 'committed', offsets: [[batch.topic, batch.partition, Number(next)]] })
        } catch (e) {
          emit({ ev: 'error', where: 'commit', ...errorInfo(e) })
          throw e
        }
      }
    },
  })
}

async function producer() {
  const p = kafka.producer({ idempotent: !!conf.idempotent, maxInFlightRequests: conf.idempotent ? 1 : 5 })
  await p.connect()
  const acks = []
  // one awaited send per message: each message's partition and offset are then known exactly
  // (a send resolves per partition batch) and the production order is the send order
  for (const [key, value, partition] of conf.messages) {
    const m = { key, value }
    if (partition !== null && partition !== undefined) m.partition = partition
    const [r] = await p.send({ topic: conf.topic, acks: -1, messages: [m] })
    acks.push([r.partition, Number(r.baseOffset), value])
  }
  await p.disconnect()
  emit({ ev: 'produced', acks })
}

async function admin() {
  const a = kafka.admin()
  await a.connect()
  const out = { ev: 'admin' }
  const { groups } = await a.describeGroups([conf.group])
  out.groups = groups.map(g => ({
    groupId: g.groupId, state: g.state, protocol: g.protocol, protocolType: g.protocolType, errorCode: g.errorCode,
    members: g.members.map(m => ({
      memberId: m.memberId, clientId: m.clientId,
      assignment: (() => {
        try {
          const a = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
          return a ? Object.entries(a.assignment).flatMap(([t, ps]) => ps.map(p => [t, p])) : []
        } catch (e) { return null }
      })(),
    })),
  }))
  const offsets = await a.fetchOffsets({ groupId: conf.group, topics: conf.topics })
  out.offsets = offsets.flatMap(({ topic, partitions }) => partitions.map(p => [topic, p.partition, Number(p.offset)]))
  const listed = await a.listGroups()
  out.listed = listed.groups.map(g => [g.groupId, g.protocolType])
  await a.disconnect()
  emit(out)
}

// CreatePartitions, AlterConfigs, DescribeConfigs and DeleteRecords on conf.topic (created here)
async function topicAdmin() {
  const a = kafka.admin()
  await a.connect()
  const out = { ev: 'topic-admin' }
  await a.createTopics({ topics: [{ topic: conf.topic, numPartitions: 1 }], waitForLeaders: true })
  await a.createPartitions({ topicPartitions: [{ topic: conf.topic, count: 3 }] })
  const md = await a.fetchTopicMetadata({ topics: [conf.topic] })
  out.partitions = md.topics[0].partitions.length
  await a.alterConfigs({ validateOnly: false, resources: [{ type: 2, name: conf.topic,
    configEntries: [{ name: 'retention.ms', value: '60000' }] }] })
  const described = await a.describeConfigs({ includeSynonyms: false,
    resources: [{ type: 2, name: conf.topic, configNames: ['retention.ms', 'cleanup.policy'] }] })
  out.configs = Object.fromEntries(described.resources[0].configEntries.map(e => [e.configName, e.configValue]))
  const p = kafka.producer()
  await p.connect()
  await p.send({ topic: conf.topic, acks: -1, messages: Array.from({ length: 6 }, (_, i) => ({ value: `v${i}`, partition: 0 })) })
  await p.disconnect()
  await a.deleteTopicRecords({ topic: conf.topic, partitions: [{ partition: 0, offset: '4' }] })
  const offsets = await a.fetchTopicOffsets(conf.topic)
  out.low = Number(offsets.find(o => o.partition === 0).low)
  await a.disconnect()
  emit(out)
}

// A transactional producer (kafkajs' producer.transaction(), sendOffsets): each transaction's
// messages and group offsets, then commit or abort as asked.
async function transactional() {
  const p = kafka.producer({ transactionalId: conf.transactional_id, idempotent: true, maxInFlightRequests: 1 })
  await p.connect()
  const ended = []
  for (const txn of conf.transactions) {
    const t = await p.transaction()
    for (const [key, value, partition] of txn.messages) {
      await t.send({ topic: conf.topic, messages: [{ key, value, partition }] })
    }
    if (txn.offsets) {
      await t.sendOffsets({
        consumerGroupId: txn.offsets.group,
        topics: [{ topic: txn.offsets.topic,
                   partitions: txn.offsets.partitions.map(([partition, offset]) => ({ partition, offset: String(offset) })) }],
      })
    }
    if (txn.commit) await t.commit()
    else await t.abort()
    ended.push(txn.commit ? 'commit' : 'abort')
  }
  await p.disconnect()
  emit({ ev: 'transactions', ended })
}

const roles = { consumer, producer, admin, 'topic-admin': topicAdmin, transactional }
roles[conf.role]().catch(e => {
  emit({ ev: 'error', where: 'fatal', ...errorInfo(e) })
  process.exit(1)
})
