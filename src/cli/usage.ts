import { SETTINGS, type Config } from '../config.js'
import { closeMatch } from '../lib/closest.js'
import { UsageError, type Command } from './command.js'
import { COMMANDS, SECTIONS } from './commands.js'

/**
 * The command line read against the table of commands (commands.ts): which command, its arguments and options, the
 * settings' flags, or a request for help or the version. Everything here is decided before any setting or file is
 * looked at, so a mistake in the command line costs nothing and creates nothing.
 */
export type Invocation =
  | { kind: 'version' }
  | { kind: 'help'; text: string }
  | { kind: 'run'; command: Command; args: string[]; options: Record<string, string>; settingsArgv: string[] }

/** A command area named without a command of it (`keys`), or with one it does not have: its usage lines follow. */
export class AreaUsageError extends UsageError {
  constructor(message: string, readonly lines: string[]) {
    super(message)
  }
}

const COLUMN = 42
const WIDTH = 120
const HELP_FLAGS = new Set(['--help', '-h'])
const VERSION_FLAGS = new Set(['--version', '-v'])

/** Every command's options by flag; one flag takes a value everywhere or nowhere. */
const OPTIONS = new Map(COMMANDS.flatMap((c) => (c.options ?? []).map((o) => [o.flag, o] as const)))
const SETTING_FLAGS = new Map(SETTINGS.map((s) => [s.flag, s]))

/** The areas (`keys`, `users`, …): the first word of commands of two words, with their second words. */
function areaOf(word: string | undefined): { name: string; commands: Command[] } | undefined {
  const commands = COMMANDS.filter((c) => c.name.startsWith(`${word} `))
  return word && commands.length > 0 ? { name: word, commands } : undefined
}

function verbOf(command: Command): string {
  return command.name.split(' ')[1] ?? ''
}

/** The `<…>` arguments of a command's usage line. */
function argumentNames(command: Command): string[] {
  return command.args?.match(/<[^>]+>/g) ?? []
}

/** The command line split into words, options (each command's), settings' flags, and help or version asked for. */
interface Read {
  words: string[]
  options: Record<string, string>
  settingsArgv: string[]
  help: boolean
  version: boolean
  /** The first flag that is nobody's. */
  unknown: string | undefined
}

function read(argv: readonly string[]): Read {
  const r: Read = { words: [], options: {}, settingsArgv: [], help: false, version: false, unknown: undefined }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (HELP_FLAGS.has(arg)) r.help = true
    else if (VERSION_FLAGS.has(arg)) r.version = true
    else if (!arg.startsWith('-') || arg === '-') r.words.push(arg)
    else {
      const eq = arg.indexOf('=')
      const [flag, inline] = eq === -1 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)]
      const option = OPTIONS.get(flag)
      const setting = SETTING_FLAGS.get(flag)
      if (option && option.value === undefined) {
        if (inline !== undefined) throw new UsageError(`${flag} takes no value`)
        r.options[flag.slice(2)] = 'true'
      } else if (option) {
        const value = inline ?? argv[++i]
        if (value === undefined) throw new UsageError(`${flag} needs a value`)
        r.options[flag.slice(2)] = value
      } else if (setting) {
        r.settingsArgv.push(arg)
        // As config.ts's parseFlags reads them: a switch setting takes the next word only when it is not a flag.
        const switchLike = setting.kind === 'bool' || setting.kind === 'proxy'
        if (inline === undefined && argv[i + 1] !== undefined && !(switchLike && argv[i + 1]!.startsWith('--'))) r.settingsArgv.push(argv[++i]!)
      } else r.unknown ??= flag
    }
  }
  return r
}

export function parseInvocation(argv: readonly string[]): Invocation {
  const r = read(argv)
  const { words } = r
  if (r.version) return { kind: 'version' }
  if (words[0] === 'help') return { kind: 'help', text: helpFor(words.slice(1)) }
  if (words.length === 0) {
    if (r.unknown) throw unknownOption(r.unknown, undefined)
    return { kind: 'help', text: globalUsage() }
  }
  const area = areaOf(words[0])
  const command = COMMANDS.find((c) => c.name === words[0]) ?? (area && words[1] !== undefined ? area.commands.find((c) => verbOf(c) === words[1]) : undefined)
  const named = command ? command.name.split(' ').length : 1
  // `keys help`, `keys list help`; for a command with arguments `help` is one (`orgs create help`).
  const helpWord = words[named] === 'help' && words.length === named + 1 && (!command || argumentNames(command).length === 0)
  if (r.help || helpWord) return { kind: 'help', text: helpFor(command ? command.name.split(' ') : words.slice(0, 1)) }
  if (r.unknown) throw unknownOption(r.unknown, command ?? area)
  if (!command) throw noSuchCommand(words, area)
  return { kind: 'run', command, args: checkedUse(command, words.slice(named), r.options), options: r.options, settingsArgv: r.settingsArgv }
}

function noSuchCommand(words: string[], area: { name: string; commands: Command[] } | undefined): UsageError {
  if (!area) return new UsageError(`unknown command: ${words.join(' ')}`)
  const verbs = area.commands.map(verbOf)
  const problem = words.length === 1 ? 'needs a command' : `has no command ${words[1]}; its commands are`
  return new AreaUsageError(`${area.name} ${problem}: ${verbs.join(', ')}`, area.commands.flatMap(usageLines))
}

/** The command's arguments, once its options are its own and its arguments as many as its usage line names. */
function checkedUse(command: Command, args: string[], options: Record<string, string>): string[] {
  for (const flag of Object.keys(options)) {
    if (!(command.options ?? []).some((o) => o.flag === `--${flag}`)) throw new UsageError(`${command.name} takes no option --${flag}`, command.name)
  }
  const names = argumentNames(command)
  if (args.length < names.length) throw new UsageError(`missing ${names[args.length]}`, command.name)
  if (args.length > names.length) {
    throw new UsageError(`${command.name} takes ${names.length === 0 ? 'no argument' : names.join(' ')}, got ${args.join(' ')}`, command.name)
  }
  return args
}

function unknownOption(flag: string, where: Command | { name: string; commands: Command[] } | undefined): UsageError {
  const own = where === undefined ? [] : 'commands' in where ? where.commands.flatMap((c) => c.options ?? []) : where.options ?? []
  const close = closeMatch(flag, [...own.map((o) => o.flag), ...SETTING_FLAGS.keys(), ...HELP_FLAGS, ...VERSION_FLAGS])
  return new UsageError(`unknown option ${flag}${close ? `; did you mean ${close}?` : ''}`, where?.name)
}

/** The help asked for by `words`: a command's, an area's, or (none) the global usage. */
function helpFor(words: string[]): string {
  if (words.length === 0) return globalUsage()
  const command = COMMANDS.find((c) => c.name === words.join(' '))
  if (command) return commandHelp(command)
  const area = areaOf(words[0])
  if (area && words.length === 1) return areaHelp(area.name, area.commands)
  throw new UsageError(`no help for ${words.join(' ')}: it is no command`)
}

function synopsis(command: Command): string {
  const options = (command.options ?? []).map((o) => `[${o.flag}${o.value ? ` ${o.value}` : ''}]`)
  return [command.name, command.args, ...options].filter(Boolean).join(' ')
}

/** `text` in lines of at most `width` characters, broken at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else line = line ? `${line} ${word}` : word
  }
  if (line) lines.push(line)
  return lines
}

/** `  left` and, from column COLUMN on (under it when left is too long), `about`, wrapped. */
function row(left: string, about: string): string[] {
  const text = wrap(about, WIDTH - COLUMN)
  const head = `  ${left}`
  if (text.length === 0) return [head]
  const indent = ' '.repeat(COLUMN)
  if (head.length >= COLUMN) return [head, ...text.map((l) => indent + l)]
  return [head.padEnd(COLUMN) + text[0], ...text.slice(1).map((l) => indent + l)]
}

/** A command's lines in the global usage (and in its area's): its usage line, then its variants. */
function usageLines(command: Command): string[] {
  const about = command.about.replace(/\.$/, '')
  return [...row(synopsis(command), about), ...(command.variants ?? []).flatMap(([usage, text]) => row(usage, text))]
}

export function globalUsage(): string {
  return [
    'Usage: service-mcp <command> [options]',
    '',
    ...SECTIONS.flatMap((s) => [s.heading, ...s.commands.flatMap(usageLines), '']),
    'Other',
    ...row('-v, --version', 'The version of this build'),
    ...row('-h, --help, help', 'This text'),
    ...row('<command> --help, help <command>', "A command's help: what it does, its arguments and options, the settings it reads"),
    '',
    'Settings: SERVICE_* environment variables or flags such as --database <file>, --port <n> (see docs/configuration.md).',
  ].join('\n')
}

function areaHelp(name: string, commands: Command[]): string {
  const heading = SECTIONS.find((s) => s.commands.includes(commands[0]!))!.heading
  return [
    `Usage: service-mcp ${name} <command> [options]`,
    '',
    heading,
    ...commands.flatMap(usageLines),
    '',
    `service-mcp ${name} <command> --help shows a command's arguments and options.`,
  ].join('\n')
}

const VALUE_OF_KIND: Record<string, string> = { int: '<n>', bool: '[true|false]', list: '<a,b,…>', url: '<url>' }

function commandHelp(command: Command): string {
  const database = {
    create: 'Creates the database when SERVICE_DATABASE names a SQLite file that does not exist yet.',
    existing: 'Works on an existing database: a SQLite file that does not exist is refused (exit code 2), and nothing is created.',
  }[command.database]
  const read: Array<keyof Config> = command.settings === 'all'
    ? SETTINGS.map((s) => s.key)
    : ['database', 'configFile', ...(command.changesCredentials ? ['redisUrl', 'redisPrefix', 'leaseMs'] as const : []), ...(command.settings ?? [])]
  const settings = SETTINGS.filter((s) => read.includes(s.key))
  return [
    `Usage: service-mcp ${synopsis(command)}`,
    '',
    ...wrap(`${command.about} ${database}`.trim(), WIDTH),
    ...(command.variants ?? []).flatMap(([usage, about]) => ['', `service-mcp ${usage}:`, ...wrap(about, WIDTH)]),
    '',
    'Options',
    ...(command.options ?? []).flatMap((o) => row(`${o.flag}${o.value ? ` ${o.value}` : ''}`, o.about)),
    ...row('-h, --help', 'This text'),
    '',
    'Settings it reads (a flag, or its environment variable; see the README\'s configuration table)',
    ...settings.flatMap((s) => row(`${s.flag} ${VALUE_OF_KIND[s.kind] ?? '<value>'}`, s.env)),
  ].join('\n')
}
