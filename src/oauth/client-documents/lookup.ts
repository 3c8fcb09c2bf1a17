import { promises as dns, type LookupAddress } from 'node:dns'
import type { LookupFunction } from 'node:net'
import { addressRefusal, isLoopbackAddress } from './addresses.js'

/**
 * The name lookup the fetch's socket uses (docs/decisions/client-metadata-documents.md). It resolves the host, refuses
 * when any answer is an address the host may not be fetched from, and hands the socket exactly the answers it checked.
 * Because the check sits inside the connection's own lookup, there is no earlier lookup for DNS rebinding to race:
 * whatever the name resolves to at connect time is what was checked.
 */

export interface ResolvedAddress {
  address: string
  family: 4 | 6
}

/** Resolves a host name to all its addresses (tests inject one that answers what they need). */
export type HostResolver = (hostname: string) => Promise<ResolvedAddress[]>

export const systemResolver: HostResolver = async (hostname) => {
  const answers = await dns.lookup(hostname, { all: true, verbatim: true })
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }))
}

/**
 * What a host's addresses must be: `global` for every host, `loopback` for a name the operator listed in
 * SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS (a test's document server; never a private range).
 */
export type AddressRule = 'global' | 'loopback'

/** Why `address` is refused under `rule`; null when the socket may connect to it. */
export function addressRuleRefusal(address: string, rule: AddressRule): string | null {
  if (rule === 'loopback') return isLoopbackAddress(address) ? null : 'not a loopback address (unsafe loopback host)'
  return addressRefusal(address)
}

/** A lookup answer refused by the address rule; the fetch reports it as such. */
export class AddressRefused extends Error {
  override name = 'AddressRefused'
  readonly code = 'ECLIENTDOCUMENTADDRESS'
}

export function guardedLookup(resolve: HostResolver, rule: AddressRule): LookupFunction {
  return (hostname, options, callback) => {
    const fail = (err: unknown) => callback(err as NodeJS.ErrnoException, '', 0)
    resolve(hostname).then((answers) => {
      let wanted: ResolvedAddress[]
      try {
        wanted = checkedAnswers(hostname, answers, rule, options.family)
      } catch (err) {
        fail(err)
        return
      }
      // Node asks for every address when it tries them in turn (autoSelectFamily), else for one.
      if (options.all) callback(null, wanted.map((a): LookupAddress => ({ address: a.address, family: a.family })))
      else callback(null, wanted[0]!.address, wanted[0]!.family)
    }, fail)
  }
}

/** The answers the socket may use: all of them checked, or a throw naming the first refused. */
function checkedAnswers(hostname: string, answers: ResolvedAddress[], rule: AddressRule, family: unknown): ResolvedAddress[] {
  for (const answer of answers) {
    const refusal = addressRuleRefusal(answer.address, rule)
    if (refusal !== null) throw new AddressRefused(`${hostname} resolves to ${answer.address}: ${refusal}`)
  }
  const wanted = family === 4 || family === 6 ? answers.filter((a) => a.family === family) : answers
  if (wanted.length === 0) throw Object.assign(new Error(`no usable address for ${hostname}`), { code: 'ENOTFOUND' })
  return wanted
}
