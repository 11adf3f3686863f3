#!/usr/bin/env node
// kafkajs over TLS and SASL for tests/interop/test_security_clients.py: produce the messages,
// consume them in a group, commit, report JSON lines on stdout.
//   node secure.js '{"bootstrap": ..., "topic": ..., "group": ..., "messages": [...],
//                    "ssl": {"ca": pem, "cert": pem|null, "key": pem|null} | null,
//                    "sasl": {"mechanism": "plain"|"scram-sha-256"|"scram-sha-512", "username": .., "password": ..} | null}'
'use strict'
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

const conf = JSON.parse(process.argv[2])
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')

const ssl = conf.ssl ? { ca: [conf.ssl.ca], rejectUnauthorized: true, servername: 'localhost',
  ...(conf.ssl.cert ? { cert: conf.ssl.cert, key: conf.ssl.key } : {}) } : false
const kafka = new Kafka({ clientId: 'kafkajs-secure', brokers: [conf.bootstrap], ssl, sasl: conf.sasl || undefined,
  logLevel: logLevel.NOTHING, connectionTimeout: 5000, retry: { retries: conf.retries ?? 5 } })

async function main() {
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: conf.topic, messages: conf.messages.map((v) => ({ value: v })) })
  await producer.disconnect()
  emit({ ev: 'produced', n: conf.messages.length })
  const consumer = kafka.consumer({ groupId: conf.group, sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topic: conf.topic, fromBeginning: true })
  const seen = []
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        seen.push(message.value.toString())
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        if (seen.length >= conf.messages.length) resolve()
      },
    }).catch(reject)
  })
  emit({ ev: 'consumed', values: seen })
  await consumer.disconnect()
}

main().then(() => process.exit(0), (e) => { emit({ ev: 'error', type: e.name, msg: String(e.message) }); process.exit(1) })
