"""What the gateway runs with when there is no config file, and what `partners init` writes.

Both describe the same starting point -- one sample partner on the built-in
web chat, served on 127.0.0.1 only -- so a teacher who runs ``partners serve``
before writing any config sees exactly what ``partners init`` would give them.

The template follows the sshd_config convention: ``# text`` explains,
``#key: value`` is a setting you switch on by deleting the ``#``.
"""

from __future__ import annotations

from pathlib import Path

from gateway.configfile import DEFAULT_CONFIG_NAME, load_config, parse_config
from gateway.core.config import Config, Secrets

DEFAULT_DATA_DIR = Path("partners-data")
"""Where the embedded default keeps its data, relative to the working directory."""
SAMPLE_PARTNER = "study-buddy"
SAMPLE_GREETING = "Hi! I'm Study Buddy. Tell me what you're working on and we'll figure it out together."


def default_config(data_dir: Path) -> Config:
    """The embedded default: Study Buddy on web chat, open to anyone who can reach 127.0.0.1."""
    return parse_config(
        {
            "data_dir": str(data_dir),
            "partners": [
                {"id": SAMPLE_PARTNER, "name": "Study Buddy", "persona": "study-buddy", "greeting": SAMPLE_GREETING}
            ],
            "bindings": [{"partner": SAMPLE_PARTNER, "channel": "webchat", "account": "default"}],
            "channels": {"webchat": {"default": {"access": {"dm": "open", "allow_from": ["*"]}}}},
        },
        source="<embedded default>",
    )


def find_config(explicit: Path | None) -> Path | None:
    """The file to read: the one named (``--config`` or ``$PARTNERS_CONFIG``), else ./partners.yaml if present."""
    if explicit is not None:
        return explicit
    here = Path(DEFAULT_CONFIG_NAME)
    return here if here.is_file() else None


def load(explicit: Path | None, *, secrets: Secrets = Secrets.RESOLVE) -> Config:
    """The config to run with; ``source`` is None when it is the embedded default (which has no secrets)."""
    path = find_config(explicit)
    return load_config(path, secrets=secrets) if path is not None else default_config(DEFAULT_DATA_DIR.resolve())


INIT_TEMPLATE = f"""\
# Partners Gateway configuration.
#
# Lines like "# this" explain; lines like "#key: value" are settings you switch
# on by deleting the "#". Check your changes with `partners doctor`.
# Reference: docs/operation.md.
#
# Secrets (bot tokens, app secrets) are never written here: write
# env:VARIABLE_NAME and export that variable before starting the gateway.

# Where the gateway keeps its database (messages, replies, pairing codes).
# A relative path is relative to this file's folder.
data_dir: partners-data

# The built-in web server: web chat, webhooks, /status, /healthz, /metrics.
http:
  host: 127.0.0.1   # 0.0.0.0 serves every network interface; keep 127.0.0.1 behind a proxy
  port: 8780        # 0 picks a free port
  # The address chat platforms use to reach this server (needed for webhooks):
  #public_url: https://partners.example.org

# Partners: the tutors. Each has a persona (the teacher's voice) and owners
# (the teacher's own accounts, who may approve learners and see more).
partners:
  - id: {SAMPLE_PARTNER}
    name: Study Buddy
    persona: study-buddy
    greeting: "{SAMPLE_GREETING}"
    # What happens to a message sent while the partner is still answering:
    # queue (answered next) or merge (folded into the running answer).
    #mid_turn: queue              # or merge; unset takes the persona's policy
    # The language model (any provider litellm supports). Unset, the persona's
    # model is used; with none at all the partner quotes its study notes.
    #model:
      #model: openai/gpt-4o-mini
      #api_key: env:OPENAI_API_KEY
      #backup: {{model: ollama/llama3, api_base: "http://127.0.0.1:11434"}}
    # The teacher's accounts; they are the partner's owners on those channels.
    # chat: the teacher's direct chat with the bot, where hand-offs arrive
    # (defaults to the user id, which is right for Telegram).
    #owners:
      #- channel: telegram
        #user: "123456789"
    # Take tools away in some contexts (rules never add a tool):
    #tool_rules:
      #- kind: group
        #remove: [schedule_reminder]

  # A second partner, routed to one Telegram group below.
  #- id: algebra-coach
    #name: Algebra Coach
    #persona: study-buddy
    #greeting: "Let's do some algebra."

# Chat apps, one block per channel, one entry per account (bot, app or inbox).
# `partners channels` lists every channel and whether it can run here.
channels:
  webchat:
    default:
      # Who may talk to the partner. In direct messages (dm):
      #   open      - anyone who can reach the page (fine on 127.0.0.1)
      #   allowlist - only the user ids in allow_from
      #   pairing   - strangers get a code; the teacher approves it with
      #               `partners pairing approve CODE`
      #   disabled  - no direct messages
      access:
        dm: open
        allow_from: ["*"]   # everyone who reaches the page is a learner (strangers get fewer tools)

  #telegram:
    #default:
      #token: env:TELEGRAM_BOT_TOKEN   # from @BotFather; export TELEGRAM_BOT_TOKEN=...
      #access:
        #dm: pairing
        #allow_from: ["123456789"]     # let these user ids in without a code ("*": everyone)
        #pairing_ttl_s: 3600           # a pairing code lasts an hour
        #pairing_max_pending: 3        # at most 3 codes waiting per account
        # In groups: mention (when mentioned, replied to or given a command),
        # reply (replies to the bot only), keyword, always, off.
        #group: mention
        #keywords: ["buddy"]           # used by the keyword policy
        #groups:                       # per-group overrides, by the platform's chat id
          #"-1001234567890":
            #policy: always
          #"-1009876543210":
            #enabled: false
        # What a refused sender sees, at most once per min_interval_s.
        #refusal:
          #notify: true
          #text: "Sorry, I can't answer here. Ask your teacher for access."   # empty: the built-in one, in the partner's language
          #min_interval_s: 3600

# Bindings: which partner answers where. The most specific binding wins:
# a conversation (chat + thread) over a chat over a whole account.
bindings:
  - partner: {SAMPLE_PARTNER}
    channel: webchat
    account: default
  #- partner: {SAMPLE_PARTNER}
    #channel: telegram
    #account: default
  #- partner: algebra-coach
    #channel: telegram
    #account: default
    #chat: "-1001234567890"

# How messages flow through the gateway.
pipeline:
  coalesce_window_s: 0.6      # wait this long for more messages from the same sender
  coalesce_max_s: 3.0         # but never delay an answer longer than this
  delivery_max_attempts: 8    # give up on a reply after this many failed sends
  shutdown_drain_s: 10.0      # on stop, let running answers finish this long
"""
