/* A small linked list and string helpers, for the differential test against ast-grep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX 64
#define SQUARE(x) ((x) * (x))
# define LIST_MIN 0

struct node {
    int value;
    struct node *next;
};

static struct node *node_new(int value) {
    struct node *n = malloc(sizeof(struct node));
    if (n == NULL) return NULL;
    n->value = value;
    n->next = NULL;
    return n;
}

static void list_free(struct node *head) {
    while (head != NULL) {
        struct node *next = head->next;
        free(head);
        head = next;
    }
}

static int list_len(const struct node *head) {
    int n = 0;
    for (const struct node *p = head; p != NULL; p = p->next) {
        n++;
    }
    return n;
}

static char *dup_upper(const char *s) {
    size_t len = strlen(s);
    char *out = malloc(len + 1);
    if (out == NULL) return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        out[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
    }
    out[len] = '\0';
    return out;
}

static int sum(const int *xs, int n) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        total += xs[i];
    }
    return total;
}

int main(int argc, char **argv) {
    struct node *head = NULL;
    for (int i = 0; i < 10; i++) {
        struct node *n = node_new(i);
        if (n == NULL) return 1;
        n->next = head;
        head = n;
    }
    printf("len=%d\n", list_len(head));
    int xs[4] = {1, 2, 3, 4};
    printf("sum=%d\n", sum(xs, 4));
    if (argc > 1) {
        char *up = dup_upper(argv[1]);
        if (up == NULL) return 2;
        printf("%s\n", up);
        free(up);
    }
    char *buf = calloc(16, sizeof(char));
    if (buf == NULL) return 3;
    strncpy(buf, "hello", 15);
    fprintf(stderr, "%s %zu\n", buf, sizeof(buf));
    free(buf);
    list_free(head);
    return 0;
}
