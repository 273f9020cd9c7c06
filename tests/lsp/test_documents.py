"""What prompts call a document: relative to its workspace folder, computed once when it opens."""

from __future__ import annotations

from dgemma_lsp.lsp.documents import DocumentStore, prompt_path, root_paths


def test_prompts_name_a_file_relative_to_its_workspace_folder() -> None:
    roots = root_paths(["file:///home/ann/proj", "file:///home/ann/proj/sub%20dir", None, "untitled:x", "/srv/code"])
    assert roots == ["/home/ann/proj", "/home/ann/proj/sub dir", "/srv/code"]
    # the deepest folder that holds the file; percent-escapes decoded; the home directory never shown
    assert prompt_path("file:///home/ann/proj/geo/shapes.py", roots) == "geo/shapes.py"
    assert prompt_path("file:///home/ann/proj/sub%20dir/a.py", roots) == "a.py"
    assert prompt_path("file:///home/ann/project2/a.py", roots) == "a.py"  # a sibling with a common prefix
    assert prompt_path("file:///tmp/scratch/notes.md", roots) == "notes.md"  # outside every folder: the name
    assert prompt_path("untitled:Untitled-1", roots) == "untitled:Untitled-1"
    assert prompt_path("fixtures/docs/close.py", ["/anywhere"]) == "fixtures/docs/close.py"  # the CLI's own words
    assert prompt_path("file:///C:/work/app/main.py", ["/C:/work"]) == "app/main.py"


def test_the_store_names_documents_for_prompts_once_at_open() -> None:
    store = DocumentStore()
    store.roots = ["/home/ann/proj"]
    doc = store.open("file:///home/ann/proj/pkg/mod.py", "python", 1, "x = 1\n")
    assert doc.shown_path == "pkg/mod.py" and doc.path == "/home/ann/proj/pkg/mod.py"


def test_a_document_built_outside_the_store_still_shows_no_absolute_path() -> None:
    from dgemma_lsp.lsp.documents import Document
    from dgemma_lsp.lsp.text import LineIndex

    doc = Document("file:///home/ann/proj/pkg/mod.py", "python", 1, LineIndex("x = 1\n"))
    assert doc.prompt_name == "mod.py"
    assert DocumentStore().open("file:///home/ann/proj/pkg/mod.py", "python", 1, "").prompt_name == "mod.py"


def test_folders_added_or_removed_later_rename_open_documents() -> None:
    store = DocumentStore()
    doc = store.open("file:///home/ann/proj/pkg/mod.py", "python", 1, "x = 1\n")
    assert doc.shown_path == "mod.py"  # no folder yet: the base name
    store.change_roots(added=root_paths(["file:///home/ann/proj"]))
    assert doc.shown_path == "pkg/mod.py" and store.roots == ["/home/ann/proj"]
    store.change_roots(added=["/home/ann/proj/pkg"])
    assert doc.shown_path == "mod.py"  # the deepest folder wins
    store.change_roots(removed=["/home/ann/proj/pkg", "/home/ann/proj"])
    assert doc.shown_path == "mod.py" and store.roots == []
    store.change_roots(added=["/home/ann/proj", "/home/ann/proj"])
    assert store.roots == ["/home/ann/proj"]  # no duplicates
