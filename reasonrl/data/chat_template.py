"""`reasonrl data chat-template MODEL_DIR OUT_DIR`: a think-aware copy of a model's tokenizer, like
Reasoning360's change_tokenizer_config.py.

Owns: rewriting the chat template so the generation prompt opens `<think>` (the model starts inside
its reasoning and every verifier scores only the text after `</think>`), optionally stripping the
reasoning (`<think>...</think>`) from assistant turns in the history, and setting `eos_token` to the
end-of-turn token; for Qwen (ChatML: `<|im_start|>assistant`) and Llama-3
(`<|start_header_id|>assistant<|end_header_id|>`) style templates. The new directory holds the
model's files (hard links where possible, else copies) with the edited `tokenizer_config.json` /
`chat_template.jinja`; the input is never changed. Does not own: encoding prompts (`data.prompts`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from reasonrl.errors import InputError

STYLES = {  # style: (assistant header the generation prompt emits, end-of-turn token)
    "qwen": ("<|im_start|>assistant\\n", "<|im_end|>"),
    "llama": ("<|start_header_id|>assistant<|end_header_id|>\\n\\n", "<|eot_id|>"),
}
THINK = "<think>\\n"
_GEN_BLOCK = re.compile(
    r"(\{%-?\s*if\s+add_generation_prompt\s*-?%\})(.*?)(\{%-?\s*endif\s*-?%\})", re.DOTALL
)
# history: assistant turns keep only what follows their last </think>
STRIP_HISTORY = (
    "{%- set ns_think = namespace(msgs=[]) %}{%- for m in messages %}"
    "{%- if m['role'] == 'assistant' and m['content'] is string and '</think>' in m['content'] %}"
    "{%- set ns_think.msgs = ns_think.msgs + [dict(m, content=m['content'].split('</think>')[-1].lstrip())] %}"
    "{%- else %}{%- set ns_think.msgs = ns_think.msgs + [m] %}{%- endif %}{%- endfor %}"
    "{%- set messages = ns_think.msgs %}"
)


def detect_style(template: str) -> str:
    for style, (header, _) in STYLES.items():
        if header.replace("\\n", "") in template.replace("\\n", ""):
            return style
    raise InputError("chat template is neither Qwen (ChatML) nor Llama-3 style; edit it by hand")


def think_template(template: str, strip_history: bool = True) -> tuple[str, str]:
    """(the template whose generation prompt opens <think>, its style)."""
    style = detect_style(template)
    if "<think>" in "".join(m.group(2) for m in _GEN_BLOCK.finditer(template)):
        raise InputError("chat template's generation prompt already opens <think>")
    header = STYLES[style][0]
    blocks = list(_GEN_BLOCK.finditer(template))
    if not blocks:
        raise InputError("chat template has no `if add_generation_prompt` block")
    m = blocks[-1]
    body = m.group(2)
    for quote in ("'", '"'):
        lit = f"{quote}{header}{quote}"
        if lit in body:
            body = body.replace(lit, f"{quote}{header}{THINK}{quote}")
            break
    else:
        raise InputError(f"chat template's generation prompt does not emit {header!r} as one string")
    out = template[: m.start()] + m.group(1) + body + m.group(3) + template[m.end() :]
    return (STRIP_HISTORY + out if strip_history else out), style


def _copy_tree(src: Path, dst: Path) -> None:
    def link_or_copy(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link_or_copy)


def write_think_tokenizer(model_dir: str | Path, out_dir: str | Path, strip_history: bool = True) -> dict:
    src, dst = Path(model_dir), Path(out_dir)
    cfg_path = src / "tokenizer_config.json"
    if not cfg_path.is_file():
        raise InputError(
            f"{src}: no tokenizer_config.json (give a Hugging Face model or tokenizer directory)"
        )
    if dst.exists():
        raise InputError(f"{dst} exists; choose a new output directory")
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    jinja = src / "chat_template.jinja"
    template = jinja.read_text(encoding="utf-8") if jinja.is_file() else cfg.get("chat_template")
    if isinstance(template, list):  # named templates: edit the default one
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    if not isinstance(template, str) or not template.strip():
        raise InputError(f"{src}: the tokenizer has no chat template")
    new, style = think_template(template, strip_history)
    tmp = dst.with_name(f".{dst.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    _copy_tree(src, tmp)
    cfg["eos_token"] = STYLES[style][1]
    for name in ("tokenizer_config.json", "chat_template.jinja"):
        if (tmp / name).exists():
            (tmp / name).unlink()  # a hard link: never write through it into the input
    if jinja.is_file():
        (tmp / "chat_template.jinja").write_text(new, encoding="utf-8")
        cfg.pop("chat_template", None)
    else:
        cfg["chat_template"] = new
    (tmp / "tokenizer_config.json").write_text(
        json.dumps(cfg, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    os.replace(tmp, dst)
    return {"out": str(dst), "style": style, "eos_token": cfg["eos_token"], "strip_history": strip_history}
