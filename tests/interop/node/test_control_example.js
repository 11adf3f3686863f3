// The Node.js example of docs/testing.md: a kafkajs test that waits on broker state instead of
// sleeping, and expels a member by time travel instead of waiting for its session timeout,
// through kgroup's JSON HTTP API (the broker started with kgroup.fault.injection.enable=true
// and metrics.listener). Run by tests/interop/test_control_node.py:
//   node test_control_example.js <bootstrap host:port> <http://host:port>
// Prints one JSON line with what it saw; exits non-zero on a failed check.
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, admin] = process.argv.slice(2)

async function api (method, path, query, body) {
  const qs = query ? '?' + new URLSearchParams(Object.entries(query).map(
    ([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])) : ''
  const r = await fetch(admin + path + qs, {
    method, body: body && JSON.stringify(body), headers: { 'content-type': 'application/json' }
  })
  const json = await r.json()
  if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json, null, 1)}`)
  return json
}

// a long poll: answered when the condition holds (or 408 with what the broker last saw)
const waitFor = (query) => api('GET', '/admin/wait', { timeout_ms: 20000, ...query })

function check (ok, what) {
  if (!ok) throw new Error('check failed: ' + what)
}

async function main () {
  await api('POST', '/admin/reset')                  // an empty broker, no restart
  const kafka = new Kafka({ clientId: 'node-example', brokers: [bootstrap], logLevel: logLevel.NOTHING })
  const adminClient = kafka.admin()
  await adminClient.connect()
  await adminClient.createTopics({ topics: [{ topic: 'orders', numPartitions: 2 }] })
  await adminClient.disconnect()
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: 'orders', messages: [{ value: 'a' }, { value: 'b' }, { value: 'c' }] })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'billing', sessionTimeout: 45000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic: 'orders', fromBeginning: true })
  await consumer.run({ eachMessage: async () => {} })
  try {
    const stable = (await waitFor({ for: 'group', group: 'billing', state: 'Stable', members: 1 })).state
    await waitFor({ for: 'lag', group: 'billing', lag: 0, topics: ['orders'] })  // all consumed and committed
    const before = stable.members[0].member_id

    // time travel: one jump past session.timeout.ms expels the member although kafkajs heartbeats
    const started = Date.now()
    const travel = await api('POST', '/admin/clock', null, { advance_ms: 46000 })
    const after = (await waitFor({ for: 'group', group: 'billing', state: 'Stable', members: 1 })).state
    check(after.members[0].member_id !== before, 'a new member after the expiry')
    check(after.generation > stable.generation, 'a new generation')
    const timeline = (await waitFor({ for: 'group', group: 'billing', state: 'Stable', timeout_ms: 1 })).state
    const expiredMs = Date.now() - started
    const groups = (await api('GET', '/admin/groups')).groups
    console.log(JSON.stringify({
      before, after: after.members[0].member_id, generation: after.generation, deadlines: travel.deadlines,
      expired_ms: expiredMs, groups: groups.map(g => g.group_id), state: timeline.state
    }))
  } finally {
    await consumer.disconnect()
  }
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1) })
